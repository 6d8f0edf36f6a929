//! How the plugin reaches a cluster: kubectl's own flags (`--kubeconfig`, `--context`,
//! `--cluster`, `--user`, `-n`). kubectl passes a plugin nothing, so the plugin parses them
//! itself, and they mean what they mean to kubectl.
use anyhow::{anyhow, bail, Context, Result};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::PathBuf;

/// The kubeconfig flags every kubectl plugin is expected to honour (global: before or after
/// the subcommand).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ClusterAccess {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The kubeconfig cluster to use (default: the context's).
    #[arg(long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The kubeconfig user to use (default: the context's).
    #[arg(long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    /// Namespace of the BenchmarkRun(s) (default: the context's namespace).
    #[arg(short, long, global = true)]
    pub namespace: Option<String>,
}

/// A client for the chosen cluster and the namespace runs are read from.
pub struct Connection {
    pub client: kube::Client,
    pub namespace: String,
}

impl ClusterAccess {
    /// Connects as kubectl would with these flags.
    pub async fn connect(&self) -> Result<Connection> {
        // kube's TLS (rustls) needs a process-wide crypto provider; another one installed first
        // is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = self.config().await?;
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
        Ok(Connection { client, namespace })
    }

    /// The client configuration: kube's own inference (which also falls back to the in-cluster
    /// service account) when no flag picks anything, else the named kubeconfig entries.
    async fn config(&self) -> Result<kube::Config> {
        let picks_nothing = self.kubeconfig.is_none()
            && self.context.is_none()
            && self.cluster.is_none()
            && self.user.is_none();
        if picks_nothing {
            return kube::Config::infer()
                .await
                .context("connecting with the current kubeconfig");
        }
        let (kubeconfig, origin) = self.read_kubeconfig()?;
        self.check_names(&kubeconfig, &origin)?;
        let options = KubeConfigOptions {
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| anyhow!("loading {origin}: {e}"))?;
        config.apply_debug_overrides(); // as Config::infer does
        Ok(config)
    }

    /// The kubeconfig `--kubeconfig` names, else kube's default (a `KUBECONFIG` list merged,
    /// or ~/.kube/config), with a description of where it came from for errors. kube's errors
    /// already print their cause: formatted, not chained, so it is not printed twice.
    fn read_kubeconfig(&self) -> Result<(Kubeconfig, String)> {
        if let Some(path) = &self.kubeconfig {
            let origin = path.display().to_string();
            let kc =
                Kubeconfig::read_from(path).map_err(|e| anyhow!("--kubeconfig {origin}: {e}"))?;
            return Ok((kc, origin));
        }
        let origin = match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(list) => format!("$KUBECONFIG ({})", list.to_string_lossy()),
            None => "~/.kube/config".to_string(),
        };
        let kc = Kubeconfig::read().map_err(|e| anyhow!("reading {origin}: {e}"))?;
        Ok((kc, origin))
    }

    /// kube reports a missing entry without saying which flag chose it; name the flag, the
    /// file and what it does hold.
    fn check_names(&self, kc: &Kubeconfig, origin: &str) -> Result<()> {
        let contexts: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        let clusters: Vec<&str> = kc.clusters.iter().map(|c| c.name.as_str()).collect();
        let users: Vec<&str> = kc.auth_infos.iter().map(|u| u.name.as_str()).collect();
        let checks = [
            ("--context", "context", &self.context, &contexts),
            ("--cluster", "cluster", &self.cluster, &clusters),
            ("--user", "user", &self.user, &users),
        ];
        for (flag, what, chosen, known) in checks {
            if let Some(name) = chosen {
                if !known.contains(&name.as_str()) {
                    bail!(
                        "{flag} {name}: no such {what} in {origin} (it has: {})",
                        list(known)
                    );
                }
            }
        }
        if self.context.is_none() && kc.current_context.as_deref().unwrap_or("").is_empty() {
            bail!(
                "{origin} sets no current-context: pass --context NAME (one of: {})",
                list(&contexts)
            );
        }
        Ok(())
    }
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
