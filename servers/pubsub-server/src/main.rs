//! msgbench reference PubSubServer: HTTP publish → Socket.IO delivery, plus /ws, REST views,
//! SQLite persistence and Prometheus metrics, on one port (HTTPS/WSS with TLS_CERT_FILE and
//! TLS_KEY_FILE: `tls.rs`; a required token with AUTH_TOKEN: `auth.rs`). Configuration: see
//! `config.rs`.
#![forbid(unsafe_code)]

mod app;
mod auth;
mod config;
mod config_error;
mod conns;
mod cpu;
mod ids;
mod metrics;
mod publish;
mod records;
mod rest;
mod sockets;
mod store;
mod tls;
mod writer;
mod ws;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod test_server;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::Router;
use socketioxide::SocketIo;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};
use tokio_rustls::TlsAcceptor;

use crate::app::{App, PublishGraph, Runtime};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::store::Store;

fn main() -> anyhow::Result<()> {
    // The image build checks the binary's version against its tag (e2e/images/check-version);
    // everything else is configured through the environment.
    if std::env::args().nth(1).as_deref() == Some("--version") {
        println!("pubsub-server {}", env!("CARGO_PKG_VERSION"));
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let invalid = |e| anyhow::anyhow!("invalid configuration: {e}");
    let cfg = Config::from_env().map_err(invalid)?;
    let tls = cfg
        .tls
        .as_ref()
        .map(tls::acceptor)
        .transpose()
        .map_err(invalid)?;
    let cpu_limit = cpu::cgroup_cpu_limit(std::path::Path::new("/sys/fs/cgroup"));
    let cpus_allowed = cpu::cpus_allowed();
    let workers = cpu::worker_threads(cfg.worker_threads, cpu_limit, cpus_allowed);
    tracing::info!(workers, cpus_allowed, ?cpu_limit, "sizing the runtime");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("pubsub-worker")
        .enable_all()
        .build()?
        .block_on(run(
            cfg,
            Runtime {
                worker_threads: workers,
                cpus_allowed,
                cpu_limit,
            },
            tls,
        ))
}

/// The server's state and routes, ready to serve (also what the in-process tests drive).
pub struct Built {
    pub app: Arc<App>,
    pub router: Router,
    pub io: SocketIo,
    pub writer: std::thread::JoinHandle<()>,
    pub stop: watch::Sender<bool>,
}

pub fn build(cfg: Config, runtime: Runtime) -> anyhow::Result<Built> {
    let metrics = Arc::new(Metrics::new());
    let limits = records::Limits {
        queue: cfg.persist_queue,
        queue_bytes: cfg.queue_budget(),
        retain: cfg.retain_messages,
        retain_bytes: cfg.message_budget(),
    };
    let (store, writer) = Store::open(&cfg.database_file, limits, metrics.clone())?;
    let ids = ids::Ids::starting_at(store.id_floor()?);
    let (layer, io) = SocketIo::builder()
        .max_buffer_size(cfg.socket_buffer)
        .build_layer();
    let (stop, stop_rx) = watch::channel(false);
    let app = Arc::new(App {
        cache: app::page_cache(cfg.cache_budget(), cfg.cache_ttl),
        ws_tx: broadcast::channel(ws::BROADCAST_CAPACITY).0,
        io: io.clone(),
        store,
        metrics,
        ids,
        started: Instant::now(),
        runtime,
        clients: Mutex::new(HashMap::new()),
        graph: Mutex::new(PublishGraph::default()),
        shutdown: stop_rx,
        cfg,
    });
    sockets::register(&io, app.clone());

    let router = Router::new()
        .route("/publish", post(publish::publish))
        .route("/health", get(rest::health))
        .route("/clients", get(rest::clients))
        .route("/messages", get(rest::messages))
        .route("/consumptions", get(rest::consumptions))
        .route("/graph/state", get(rest::graph))
        .route("/metrics", get(rest::metrics))
        .route("/ws", get(ws::upgrade))
        .layer(DefaultBodyLimit::max(publish::MAX_BODY))
        .layer(layer);
    // Outermost, so a request without the token reaches neither socketioxide nor a handler.
    let router = match &app.cfg.auth {
        Some(auth) => router.layer(axum::middleware::from_fn_with_state(
            auth::Guard {
                auth: Arc::new(auth.clone()),
                refused: app.metrics.auth_refused.clone(),
            },
            auth::require,
        )),
        None => router,
    };
    let router = router.with_state(app.clone());
    Ok(Built {
        app,
        router,
        io,
        writer,
        stop,
    })
}

/// Serves `router` on `listener` behind the connection cap, over TLS when `tls` is set, until
/// `drain` completes and the open connections have finished.
pub async fn serve<F>(
    listener: TcpListener,
    router: Router,
    app: &App,
    tls: Option<TlsAcceptor>,
    drain: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    // Engine.IO writes one small frame per packet: without TCP_NODELAY, Nagle + delayed ACK
    // would hold the second of two back-to-back frames for up to ~40 ms.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
    });
    let capped = conns::Capped::new(listener, app.cfg.max_connections, app.metrics.clone())
        .with_tls(tls.clone());
    match tls {
        None => {
            axum::serve(capped, router)
                .with_graceful_shutdown(drain)
                .await
        }
        Some(acceptor) => {
            let listener = tls::Handshakes::new(capped, acceptor, app.metrics.clone());
            axum::serve(listener, router)
                .with_graceful_shutdown(drain)
                .await
        }
    }
}

async fn run(cfg: Config, runtime: Runtime, tls: Option<TlsAcceptor>) -> anyhow::Result<()> {
    let Built {
        app,
        router,
        io,
        writer,
        stop: stop_tx,
    } = build(cfg.clone(), runtime)?;

    let listener = tokio::net::TcpListener::bind((cfg.bind.as_str(), cfg.port))
        .await
        .map_err(|e| anyhow::anyhow!("PORT={}: cannot listen on {}: {e}", cfg.port, cfg.bind))?;
    let addr: SocketAddr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let auth = cfg.auth.is_some(); // whether a token is required; never the token
    tracing::info!(%addr, scheme, auth, emit_mode = ?cfg.emit_mode, ws_mode = ?cfg.ws_mode, database = %cfg.database_file, "serving");
    // Tests and scripts wait for this line (and read the port from it when PORT=0).
    println!("pubsub-server listening on {scheme}://{addr}");

    let drain = {
        let io = io.clone();
        async move {
            shutdown_signal().await;
            tracing::info!("shutdown requested: closing connections");
            let _ = stop_tx.send(true);
            io.close().await;
        }
    };
    let serve = serve(listener, router, &app, tls, drain);
    let mut stop = app.shutdown.clone();
    tokio::select! {
        res = serve => res?,
        // Bound the drain: after the grace period, remaining connections are cut.
        _ = async {
            let _ = stop.wait_for(|s| *s).await;
            tokio::time::sleep(cfg.shutdown_grace).await;
        } => tracing::warn!("grace period over; cutting remaining connections"),
    }
    if let Err(e) = app.store.flush().await {
        tracing::error!(error = %e, "not everything queued could be stored");
    }
    if let Err(e) = app.ids.seal(&app.store).await {
        tracing::warn!(error = %e, "unused ids not given back; the next start skips them");
    }
    drop(app);
    drop(writer); // the writer thread ends with the process; everything queued is committed
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
}
