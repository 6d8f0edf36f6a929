//! A loopback "API server" for the gate's tests: it answers each read of a named run in
//! namespace `ci` from a script (the `n`th read gets the script's answer for `n`), a list of
//! runs (`-l`) from the script named [`LIST`] (namespace `ci`) or [`LIST_ALL`] (every
//! namespace), 404 for any other path, one request per connection, and counts the reads.
#![allow(dead_code)]
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The answer to the `n`th read (from 1) of a run: a status code and a JSON body.
pub type Script = fn(n: usize) -> (u16, serde_json::Value);

const RUNS_PATH: &str = "/apis/msgbench.dev/v1alpha1/namespaces/ci/benchmarkruns/";
const LIST_PATH: &str = "/apis/msgbench.dev/v1alpha1/namespaces/ci/benchmarkruns?";
const LIST_ALL_PATH: &str = "/apis/msgbench.dev/v1alpha1/benchmarkruns?";
/// The script answering a list of runs in namespace `ci`; [`ApiServer::reads`] counts them.
pub const LIST: &str = "?list";
/// The script answering a list of runs in every namespace.
pub const LIST_ALL: &str = "?list-all";

/// A BenchmarkRunList of `items`, as the API server answers a list.
pub fn list(items: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"apiVersion": "msgbench.dev/v1alpha1", "kind": "BenchmarkRunList",
        "metadata": {"resourceVersion": "1"}, "items": items})
}

pub fn status(code: u16, reason: &str) -> serde_json::Value {
    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": format!("{reason} (test server)"), "reason": reason, "code": code})
}

/// A loopback API server answering reads of the scripted runs in namespace `ci` (404 for any
/// other), one request per connection; it counts the reads of each run.
pub struct ApiServer {
    pub kubeconfig: PathBuf,
    reads: Arc<Mutex<HashMap<String, usize>>>,
    queries: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl ApiServer {
    pub fn start(scripts: &[(&str, Script)]) -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let scripts: HashMap<String, Script> =
            scripts.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        let reads = Arc::new(Mutex::new(HashMap::new()));
        let queries = Arc::new(Mutex::new(Vec::new()));
        let (counts, seen) = (reads.clone(), queries.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                answer(stream, &scripts, &counts, &seen);
            }
        });
        let dir = tempfile::tempdir().unwrap();
        ApiServer {
            kubeconfig: kubeconfig(dir.path(), &url),
            reads,
            queries,
            _dir: dir,
        }
    }

    /// The query strings of the lists asked for, in order.
    pub fn queries(&self) -> Vec<String> {
        self.queries.lock().unwrap().clone()
    }

    pub fn reads(&self, name: &str) -> usize {
        self.reads.lock().unwrap().get(name).copied().unwrap_or(0)
    }
}

/// The request line of a GET on `stream`, its headers read past (a GET has no body: they end
/// at the empty line).
pub fn request_line(stream: &TcpStream) -> String {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut header = String::new();
    while reader.read_line(&mut header).unwrap() > 2 {
        header.clear();
    }
    request_line
}

fn answer(
    stream: TcpStream,
    scripts: &HashMap<String, Script>,
    reads: &Mutex<HashMap<String, usize>>,
    queries: &Mutex<Vec<String>>,
) {
    let request_line = request_line(&stream);
    let path = request_line.split(' ').nth(1).unwrap_or("");
    let listed = [(LIST_PATH, LIST), (LIST_ALL_PATH, LIST_ALL)]
        .into_iter()
        .find_map(|(prefix, key)| Some((path.strip_prefix(prefix)?, key)));
    if let Some((query, _)) = listed {
        queries.lock().unwrap().push(query.to_string());
    }
    let key = match listed {
        Some((_, key)) => Some(key),
        None => path.strip_prefix(RUNS_PATH),
    };
    let script = key.and_then(|n| scripts.get_key_value(n));
    let (code, body) = match script {
        Some((name, script)) => {
            let mut r = reads.lock().unwrap();
            let n = r.entry(name.clone()).or_insert(0);
            *n += 1;
            script(*n)
        }
        None => (404, status(404, "NotFound")),
    };
    let body = body.to_string();
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
}

pub fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster: {{server: '{server}'}}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context: {{cluster: k, user: u, namespace: ci}}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}
