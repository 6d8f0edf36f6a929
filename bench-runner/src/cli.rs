//! The command line of the `bench-runner` binary.
use bench_runner::tls::TlsFiles;
use bench_runner::{stream_sweep, termination, ClientPath};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "bench-runner", version, about = "msgbench load generator")]
pub struct Cli {
    /// Where a failure is written as `{"reason","message"}` JSON for Kubernetes to report
    /// (default: /dev/termination-log, when that file exists, as it does in a container).
    #[arg(long, global = true, env = termination::PATH_ENV)]
    pub termination_log: Option<PathBuf>,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Run a workload against a target and write the result. A NATS target that requires
    /// auth takes MSGBENCH_TOKEN, MSGBENCH_NKEY_SEED, MSGBENCH_CREDS (a .creds file's content),
    /// or MSGBENCH_USERNAME and MSGBENCH_PASSWORD, an MQTT broker that requires a login
    /// MSGBENCH_USERNAME and MSGBENCH_PASSWORD, a WebSocket or Socket.IO server MSGBENCH_TOKEN,
    /// a pusher target its app's MSGBENCH_PUSHER_APP_ID, MSGBENCH_PUSHER_KEY and
    /// MSGBENCH_PUSHER_SECRET, from the environment (never from arguments, which `ps` shows).
    Run(RunArgs),
    /// Merge results of the runners of one run into the result one process would report.
    Merge {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Print the table of a result file.
    Report { input: PathBuf },
    /// In a server pod that shares its process namespace: signal the server process, cut its
    /// network or its power when the operator asks (POST /faults), with credentials it signed
    /// for this server object only.
    FaultAgent {
        /// Name of the server process (`/proc/<pid>/comm`), e.g. nats-server or mosquitto.
        #[arg(long)]
        process: String,
        #[arg(long, default_value = "0.0.0.0:9091")]
        listen: std::net::SocketAddr,
        /// The operator's Ed25519 public keys (base64, comma-separated: current, previous).
        /// Required: the agent never runs without checking credentials.
        #[arg(long, env = runner_api::control_auth::PUBLIC_KEY_ENV)]
        control_public_key: Option<String>,
        /// The uid of the server object: credentials for anything else are refused. Required.
        #[arg(long, env = runner_api::fault_agent::SERVER_UID_ENV)]
        server_uid: Option<String>,
        /// Also carry out partitions (needs NET_ADMIN in the pod's network namespace).
        #[arg(long)]
        network: bool,
        /// The nftables program partitions use.
        #[arg(long, default_value = "/usr/sbin/nft")]
        nft: PathBuf,
        /// The server's ports its peers use (a partition `from: peers`).
        #[arg(long, value_delimiter = ',')]
        peer_ports: Vec<u16>,
        /// The server's client ports (a partition `from: clients`).
        #[arg(long, value_delimiter = ',')]
        client_ports: Vec<u16>,
        /// The lazy file system's control socket a power loss is asked of (absent: the server
        /// does not run under it, and power losses are refused).
        #[arg(long, default_value = runner_api::fault_agent::LAZYFS_CONTROL_SOCKET)]
        lazyfs_control: PathBuf,
    },
    /// In-cluster runner: connect, report ready on GET /ready, start at the time given by
    /// POST /start, print one `MSGBENCH-RESULT` log line per trial, exit 0.
    Agent {
        /// Agent config (target, workload, trials, barrier timeout) as YAML or JSON.
        #[arg(
            short = 'f',
            long = "config",
            default_value = "/etc/msgbench/agent.yaml"
        )]
        config: PathBuf,
        /// Runner id, 1 to 255 (default: JOB_COMPLETION_INDEX + 1 of an Indexed Job).
        #[arg(long, env = "MSGBENCH_RUNNER_ID", value_parser = clap::value_parser!(u16).range(1..=255))]
        runner_id: Option<u16>,
        /// Address of /ready, /start, /progress and /results.
        #[arg(long, default_value = "0.0.0.0:9090")]
        listen: std::net::SocketAddr,
        /// Address of the live Prometheus /metrics (open: counts only).
        #[arg(long, default_value = "0.0.0.0:9102")]
        metrics_listen: std::net::SocketAddr,
        /// The operator's Ed25519 public keys (base64, comma-separated: current, previous):
        /// every endpoint but /ready needs a credential it signed for `--run-uid`. Not a
        /// secret. Required: the agent never runs without checking credentials.
        #[arg(long, env = runner_api::control_auth::PUBLIC_KEY_ENV)]
        control_public_key: Option<String>,
        /// The uid of this runner's BenchmarkRun: credentials for other runs are refused.
        /// Required.
        #[arg(long, env = runner_api::control_auth::RUN_UID_ENV)]
        run_uid: Option<String>,
    },
    /// Delete the JetStream streams of one BenchmarkRun (`<stream>_<RUN>G<generation>_T<trial>`),
    /// e.g. those a killed runner left behind. Prints one JSON line
    /// `{"run","deleted":[..],"failed":[{"stream","error"}]}`; exits 1 when a delete failed.
    /// Credentials from the environment as for `run` (MSGBENCH_TOKEN, ...).
    DeleteStreams(DeleteStreams),
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Workload YAML (or JSON) file.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// nats://host:port (tls://: NATS over TLS), mqtt://host:port (mqtts://: over TLS, port
    /// 8883 by default), http://host:port (socketio; https://: over TLS), ws://host:port
    /// (websocket, pusher; wss://: websocket over TLS).
    #[arg(long, env = "MSGBENCH_TARGET")]
    pub target: String,
    /// Where to write the JSON result.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Runner id carried in every payload, 1 to 255 (default: random). Runners of one run
    /// need distinct ids; latency is only measured for messages carrying this runner's id.
    #[arg(long, env = "MSGBENCH_RUNNER_ID", value_parser = clap::value_parser!(u16).range(1..=255))]
    pub runner_id: Option<u16>,
    /// Exit with status 3 when the generator was saturated.
    #[arg(long)]
    pub fail_if_saturated: bool,
    /// Seconds to keep retrying a target that refuses connections or does not resolve yet,
    /// before the load starts; then fail naming the URL, attempts and last error.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub connect_timeout_seconds: u32,
    /// PEM CA certificate a TLS target's certificate is verified with (default: the public
    /// web roots).
    #[arg(long, env = "MSGBENCH_TLS_CA_FILE")]
    pub tls_ca_file: Option<PathBuf>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// WebSocket and Socket.IO: send MSGBENCH_TOKEN verbatim as this HTTP header's value
    /// (default: `Authorization: Bearer <token>`).
    #[arg(long, env = "MSGBENCH_TOKEN_HEADER", conflicts_with = "token_query")]
    pub token_header: Option<String>,
    /// WebSocket and Socket.IO: send MSGBENCH_TOKEN, URL-encoded, as this query parameter.
    #[arg(long, env = "MSGBENCH_TOKEN_QUERY")]
    pub token_query: Option<String>,
    /// Client code for core NATS and MQTT 3.1.1 QoS 0/1: `wire` (batched, hand-written) or
    /// `library` (async-nats / rumqttc). For comparing the two.
    #[arg(long, value_enum, default_value_t = ClientPath::default())]
    pub client: ClientPath,
}

/// A TLS target's client certificate and name (the CA has its own flag per command).
#[derive(clap::Args)]
pub struct TlsArgs {
    /// PEM client certificate presented to a TLS target that asks for one (with
    /// --tls-key-file).
    #[arg(long, env = "MSGBENCH_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, env = "MSGBENCH_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// The name the target's certificate must carry, also sent as SNI (default: the URL's
    /// host), for a server reached by an address its certificate does not name.
    #[arg(long, env = "MSGBENCH_TLS_SERVER_NAME")]
    pub tls_server_name: Option<String>,
}

impl TlsArgs {
    pub fn files(self, ca_file: Option<PathBuf>) -> TlsFiles {
        TlsFiles {
            ca_file,
            cert_file: self.tls_cert_file,
            key_file: self.tls_key_file,
            server_name: self.tls_server_name,
        }
    }
}

#[derive(clap::Args)]
pub struct DeleteStreams {
    /// nats://host:port or tls://host:port.
    #[arg(long)]
    pub url: String,
    /// The run: the first 8 hex digits of its uid.
    #[arg(long, value_parser = stream_sweep::parse_run)]
    pub run: String,
    /// PEM CA certificate a TLS server's certificate is verified with (default: the public
    /// web roots).
    #[arg(long, visible_alias = "tls-ca-file", env = "MSGBENCH_TLS_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Seconds to keep retrying a server that refuses connections or does not resolve yet;
    /// then fail naming the URL.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub connect_timeout_seconds: u32,
    /// Prefix of the credential variables: `<prefix>_TOKEN`, `<prefix>_NKEY_SEED`,
    /// `<prefix>_CREDS`, or `<prefix>_USERNAME` and `<prefix>_PASSWORD` (an agent config's
    /// `targetAuth` prefix).
    #[arg(long, default_value = "MSGBENCH")]
    pub auth_env_prefix: String,
}
