//! The plugin asks the API server kubectl would ask with the same flags: a kubeconfig with
//! contexts `a` and `b` points at two loopback servers, and only the chosen one may be asked,
//! in the namespace given or the chosen context's.
mod common;
#[path = "common/scripted_api.rs"]
mod scripted_api;

use kubectl_msgbench::{export, source};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

const RUN: &str = "nats-plain"; // metadata.name of fixtures/plain-run.yaml
const RUNS_PATH: &str = "/apis/msgbench.dev/v1alpha1/namespaces/";
const NOT_FOUND: &str =
    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;

/// A loopback "API server" that serves the fixture run in any namespace and records the
/// request lines it got.
struct ApiServer {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl ApiServer {
    fn start() -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                answer(stream, &seen);
            }
        });
        ApiServer { url, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// One request per connection (`Connection: close`): the run for
/// `GET .../namespaces/NS/benchmarkruns/nats-plain`, a 404 Status for anything else.
fn answer(stream: TcpStream, seen: &Mutex<Vec<String>>) {
    let request_line = scripted_api::request_line(&stream);
    let request_line = request_line.trim_end().to_string();
    seen.lock().unwrap().push(request_line.clone());
    let path = request_line.split(' ').nth(1).unwrap_or("");
    let namespace = path
        .strip_prefix(RUNS_PATH)
        .and_then(|rest| rest.strip_suffix(&format!("/benchmarkruns/{RUN}")));
    let (status, body) = match namespace {
        Some(ns) if request_line.starts_with("GET ") => ("200 OK", run_json(ns)),
        _ => ("404 Not Found", NOT_FOUND.to_string()),
    };
    let mut stream = stream;
    let headers = "Content-Type: application/json\r\nConnection: close";
    let length = body.len();
    write!(
        stream,
        "HTTP/1.1 {status}\r\n{headers}\r\nContent-Length: {length}\r\n\r\n{body}"
    )
    .unwrap();
}

/// fixtures/plain-run.yaml as the API server returns it: JSON, in namespace `ns`.
fn run_json(ns: &str) -> String {
    let text = std::fs::read_to_string(common::fixture("plain-run.yaml")).unwrap();
    let mut run: serde_json::Value = serde_norway::from_str(&text).unwrap();
    run["metadata"]["namespace"] = ns.into();
    run.to_string()
}

/// Contexts `a` (current) and `b`, each with its own cluster and default namespace.
fn write_kubeconfig(dir: &Path, a: &ApiServer, b: &ApiServer) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1
kind: Config
current-context: a
clusters:
- name: cluster-a
  cluster: {{server: '{}'}}
- name: cluster-b
  cluster: {{server: '{}'}}
users:
- name: nobody
  user: {{}}
contexts:
- name: a
  context: {{cluster: cluster-a, user: nobody, namespace: ns-a}}
- name: b
  context: {{cluster: cluster-b, user: nobody, namespace: ns-b}}
",
        a.url, b.url
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The binary with `args`; `kubeconfig_env` becomes $KUBECONFIG (else it is unset). No proxy
/// variables, so kube connects to the loopback servers directly.
fn plugin(args: &[&str], kubeconfig_env: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-msgbench"));
    cmd.args(args);
    for var in [
        "KUBECONFIG",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ] {
        cmd.env_remove(var);
    }
    if let Some(path) = kubeconfig_env {
        cmd.env("KUBECONFIG", path);
    }
    cmd.output().unwrap()
}

struct Setup {
    a: ApiServer,
    b: ApiServer,
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

fn setup() -> Setup {
    let (a, b) = (ApiServer::start(), ApiServer::start());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &a, &b);
    Setup {
        a,
        b,
        _dir: dir,
        kubeconfig,
    }
}

fn get(ns: &str) -> String {
    format!("GET {RUNS_PATH}{ns}/benchmarkruns/{RUN} HTTP/1.1")
}

/// The export of the run read from the cluster is the export of the fixture it served.
/// `asked` got exactly one read of the run in `ns`, and `spared` nothing.
fn assert_only(asked: &ApiServer, ns: &str, spared: &ApiServer) {
    assert_eq!(asked.requests(), [get(ns)]);
    assert!(
        spared.requests().is_empty(),
        "the other server was asked: {:?}",
        spared.requests()
    );
}

fn assert_exported(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "plugin failed: {stderr}");
    let want = export::to_json(&source::from_file(&common::fixture("plain-run.yaml")).unwrap());
    assert_eq!(String::from_utf8_lossy(&out.stdout), want.unwrap());
}

#[test]
fn context_b_and_namespace_before_the_subcommand() {
    let s = setup();
    let kc = s.kubeconfig.to_str().unwrap();
    let args = [
        "--kubeconfig",
        kc,
        "--context",
        "b",
        "-n",
        "team-x",
        "export",
        RUN,
        "-o",
        "json",
    ];
    let out = plugin(&args, None);
    assert_exported(&out);
    assert_only(&s.b, "team-x", &s.a);
}

#[test]
fn context_b_after_the_subcommand_reads_its_namespace() {
    let s = setup();
    let kc = s.kubeconfig.to_str().unwrap();
    let args = [
        "export",
        RUN,
        "-o",
        "json",
        "--kubeconfig",
        kc,
        "--context",
        "b",
    ];
    assert_exported(&plugin(&args, None));
    assert_only(&s.b, "ns-b", &s.a);
}

/// No flag: $KUBECONFIG's current-context (a) and its namespace, as kubectl.
#[test]
fn no_flags_use_kubeconfig_env_and_current_context() {
    let s = setup();
    let out = plugin(&["export", RUN, "-o", "json"], Some(&s.kubeconfig));
    assert_exported(&out);
    assert_only(&s.a, "ns-a", &s.b);
}

/// --cluster overrides the context's cluster; the namespace stays the context's.
#[test]
fn cluster_flag_overrides_the_contexts_cluster() {
    let s = setup();
    let kc = s.kubeconfig.to_str().unwrap();
    let args = [
        "export",
        RUN,
        "-o",
        "json",
        "--kubeconfig",
        kc,
        "--context",
        "b",
        "--cluster",
        "cluster-a",
    ];
    assert_exported(&plugin(&args, None));
    assert_only(&s.a, "ns-b", &s.b);
}

/// An unknown name fails before any request and names the flag and the file.
#[test]
fn unknown_context_names_the_flag_and_file() {
    let s = setup();
    let kc = s.kubeconfig.to_str().unwrap();
    let args = [
        "--kubeconfig",
        kc,
        "--context",
        "staging",
        "export",
        RUN,
        "-o",
        "json",
    ];
    let out = plugin(&args, None);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!("--context staging: no such context in {kc} (it has: a, b)");
    assert!(stderr.contains(&want), "stderr: {stderr}");
    assert!(s.a.requests().is_empty() && s.b.requests().is_empty());
}
