//! Operator-mode (decentralised) NATS accounts as a team makes them: the official NATS CLI's
//! `nats auth` (`e2e/tools/ensure nats`, natscli v0.5.0) writes an operator, a JetStream
//! account and a user into a throwaway store, then the user's credentials file. The server's
//! config preloads the account JWTs (`resolver: MEMORY`).
use anyhow::{bail, Context, Result};
use base64::Engine;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One operator's store: its JWTs and a user's credentials file.
pub struct NatsOperator {
    /// The operator's JWT (the server's `operator`).
    pub operator_jwt: String,
    /// (public key, JWT) of the system account and the JetStream account.
    pub accounts: Vec<(String, String)>,
    /// The system account's public key.
    pub system_account: String,
    /// `bench`'s credentials file: its JWT and seed.
    pub creds: String,
}

impl NatsOperator {
    /// Operator `name`, account `APP` with JetStream (256 MiB memory and disk), user `bench`,
    /// made under `dir` (its own XDG directories: nothing outside it is touched).
    pub fn create(dir: &Path, name: &str) -> Result<NatsOperator> {
        let run = |args: &[&str]| -> Result<String> {
            let out = Command::new("nats")
                .args(args)
                .env("XDG_CONFIG_HOME", dir.join("config"))
                .env("XDG_DATA_HOME", dir.join("data"))
                .output()
                .context("running `nats` (e2e/tools/ensure nats installs it)")?;
            if !out.status.success() {
                bail!(
                    "nats {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        };
        run(&["auth", "operator", "add", name])?;
        let js = ["--jetstream", "--js-memory", "256M", "--js-disk", "256M"];
        run(&[
            &[
                "auth",
                "account",
                "add",
                "APP",
                "--operator",
                name,
                "--defaults",
            ][..],
            &js,
        ]
        .concat())?;
        run(&[
            "auth",
            "user",
            "add",
            "bench",
            "APP",
            "--operator",
            name,
            "--defaults",
        ])?;
        let creds_file = dir.join(format!("{name}-bench.creds"));
        let creds_path = creds_file.to_str().context("a UTF-8 path")?;
        run(&[
            "auth",
            "user",
            "credential",
            creds_path,
            "bench",
            "APP",
            "--operator",
            name,
        ])?;
        let store: PathBuf = dir.join("data/nats/nsc/stores").join(name);
        let read =
            |p: PathBuf| std::fs::read_to_string(&p).with_context(|| p.display().to_string());
        let mut accounts = Vec::new();
        for a in ["SYSTEM", "APP"] {
            let jwt = read(store.join(format!("accounts/{a}/{a}.jwt")))?
                .trim()
                .to_string();
            accounts.push((subject(&jwt)?, jwt));
        }
        Ok(NatsOperator {
            operator_jwt: read(store.join(format!("{name}.jwt")))?.trim().to_string(),
            system_account: accounts[0].0.clone(),
            accounts,
            creds: read(creds_file)?,
        })
    }

    /// The server's auth settings (nats-server config syntax).
    pub fn server_config(&self) -> String {
        let preload: String = (self.accounts.iter())
            .map(|(key, jwt)| format!("  {key}: {jwt}\n"))
            .collect();
        format!(
            "operator: {}\nsystem_account: {}\nresolver: MEMORY\nresolver_preload: {{\n{preload}}}\n",
            self.operator_jwt, self.system_account
        )
    }
}

/// A JWT's `sub` claim (the public key of what it describes).
fn subject(jwt: &str) -> Result<String> {
    let payload = jwt.split('.').nth(1).context("a JWT has three parts")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .context("JWT payload")?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes)?;
    claims["sub"]
        .as_str()
        .map(String::from)
        .context("a JWT without `sub`")
}
