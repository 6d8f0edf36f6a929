//! msgbench installed on a cluster as it would be on one it did not build: a real OCI registry
//! (htpasswd, TLS from a throwaway CA), images pushed with `make push`, the chart pushed with
//! `make chart-push` and installed from `oci://` with the values `make push` wrote (the registry
//! and every image's digest) and a pull Secret holding the pull credential, never the pushing
//! one, by the README's own blocks run as they stand. The images live under a path of their own
//! in the registry, so none of them is in the node's image store when the test starts (checked).
//!
//! Then: an image the kubelet cannot pull ends a run fast, naming it (no pull Secret; a tag that
//! does not exist); the README's first run Succeeds; and every msgbench pod asks for its image
//! by the digest `make push` printed and runs that digest. The suite's next test module installs
//! the chart from the checkout again.
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Api;
use msgbench_crds::RunFailureReason;
use msgbench_e2e::harness::e2e_label;
use msgbench_e2e::kinds::{self, Kind};
use msgbench_e2e::registry;
use msgbench_e2e::{chart, run, runs, wait, TestContext};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[tokio::test]
async fn installs_from_a_registry_and_pull_failures_end_runs_naming_the_image() {
    if let Some(why) = registry::unreachable_from_nodes() {
        eprintln!("skipped: {why}");
        return;
    }
    run("registry-install", body).await;
}

async fn body(ctx: TestContext) -> Result<()> {
    let reg = tokio::task::spawn_blocking(registry::up).await??;
    // A path of this test's own: nothing under it can be in the node's store yet.
    let registry = format!("{}/{}", reg.host, ctx.ns);
    let cached: Vec<String> = registry::node_images()?
        .into_iter()
        .filter(|r| r.starts_with(&registry))
        .collect();
    ensure!(cached.is_empty(), "already on the node: {cached:?}");
    tokio::task::spawn_blocking(registry::build_plugin).await??;
    let env = registry::block_env(&reg, &registry, &ctx.ns);

    let pushed = block(&env, "e2e:registry-push").await?;
    let digests = registry::pushed_digests(&pushed);
    eprintln!("pushed: {digests:#?}");
    let runner_ref = format!("{registry}/msgbench/bench-runner:0.1.0");
    ensure!(
        digests.contains_key(&runner_ref),
        "make push printed no {runner_ref}"
    );
    let pinned = |r: &str| format!("{r}@{}", digests.get(r).map_or("?", String::as_str));
    block(&env, "e2e:registry-install").await?;
    pull_secrets_hold_the_pull_credential(&ctx, &reg).await?;
    let operator_ref = format!("{registry}/msgbench/operator:0.1.0");
    let operator = ready_pod_running(
        &ctx,
        chart::namespace(),
        chart::OPERATOR_SELECTOR,
        &pinned(&operator_ref),
    )
    .await?;
    same_digest(&operator, &digests)?;

    pull_failures_end_runs(&ctx, &registry, &runner_ref).await?;

    block(&env, "e2e:registry-first-run").await?;
    let br = runs::finished(&ctx, "quickstart", Duration::from_secs(30)).await?;
    let runners = runs::field(&br, "/status/environment/runnerPods");
    let runner = runners[0]["imageID"].as_str().unwrap_or_default();
    ensure!(
        runners[0]["image"] == pinned(&runner_ref).as_str(),
        "runner pods run the operator's default, pinned by digest: {runners}"
    );
    same_digest(&(pinned(&runner_ref), runner.to_string()), &digests)?;
    let jsc = Kind::JetStreamCluster
        .api(&ctx.client, &ctx.ns)
        .get("quickstart")
        .await?;
    let server = &runs::field(&jsc, "/status/images")[0];
    same_digest(
        &(
            server["image"].as_str().unwrap_or_default().to_string(),
            server["imageID"].as_str().unwrap_or_default().to_string(),
        ),
        &digests,
    )?;
    ensure!(
        std::path::Path::new(&msgbench_e2e::cluster::repo_root().join("quickstart.html")).exists(),
        "the README's report step wrote quickstart.html"
    );
    let _ = std::fs::remove_file(msgbench_e2e::cluster::repo_root().join("quickstart.html"));
    let _ = std::fs::remove_file(msgbench_e2e::cluster::repo_root().join("msgbench-images.yaml"));
    plugin_reads_the_named_context(&ctx).await
}

/// Runs a README block off the async workers.
async fn block(env: &BTreeMap<String, String>, marker: &'static str) -> Result<String> {
    let env = env.clone();
    tokio::task::spawn_blocking(move || registry::run_block(marker, &env)).await?
}

/// The (image, imageID) of a ready pod that `selector` picks in `ns` running `image`. Pods of
/// the install before may still be on their way out: they are not the ones asked about.
async fn ready_pod_running(
    ctx: &TestContext,
    ns: &str,
    selector: &str,
    image: &str,
) -> Result<(String, String)> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let what = format!("a ready pod {selector} in {ns} running {image}");
    wait::poll(
        Duration::from_secs(60),
        Duration::from_secs(1),
        &what,
        || {
            let pods = pods.clone();
            async move {
                let list = pods.list(&ListParams::default().labels(selector)).await?;
                Ok(list.items.iter().find_map(|p| {
                    let st = p.status.as_ref()?;
                    let ready = st
                        .conditions
                        .as_ref()?
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True");
                    // The spec's reference: the status may name another tag of the same
                    // content (this build pushed under an earlier run's path); the digest is
                    // what is compared.
                    let asked = p.spec.as_ref()?.containers.first()?.image.as_deref()?;
                    let cs = st.container_statuses.as_ref()?.first()?;
                    (ready && asked == image).then(|| (asked.to_string(), cs.image_id.clone()))
                }))
            }
        },
    )
    .await
}

/// The pod asks for its image by the digest `make push` printed for it, and its imageID names
/// that digest.
fn same_digest(
    (image, image_id): &(String, String),
    pushed: &BTreeMap<String, String>,
) -> Result<()> {
    let (name, pin) = image
        .split_once('@')
        .with_context(|| format!("{image} is not pinned by digest"))?;
    let want = pushed
        .get(name)
        .with_context(|| format!("{name} is not an image make push pushed: {pushed:?}"))?;
    ensure!(
        pin == want,
        "{image}: pinned to {pin}, make push printed {want}"
    );
    ensure!(
        image_id.ends_with(&format!("@{want}")),
        "{image}: the kubelet ran {image_id}, the registry served {want}"
    );
    eprintln!("{image}: runs {image_id}");
    Ok(())
}

/// A run in a namespace without the pull Secret, and one whose runner tag does not exist: both
/// end Failed (ImagePullFailed) naming the image, within about a minute. Runs first, so the
/// default runner image is not on the node yet (the kubelet would not pull it again).
async fn pull_failures_end_runs(ctx: &TestContext, registry: &str, runner_ref: &str) -> Result<()> {
    let bare = format!("{}-nosecret", ctx.ns);
    create_namespace(ctx, &bare).await?;
    let missing = format!("{registry}/msgbench/bench-runner:does-not-exist");
    let started = Instant::now();
    // An endpoint target: runner pods are created at once (nothing listens there; the pull
    // fails before any connection is tried).
    let manifest = |name: &str, image: Option<&str>| {
        let image = image.map_or(String::new(), |i| format!("\n    image: {i}"));
        format!(
            "apiVersion: msgbench.dev/v1alpha1\nkind: BenchmarkRun\nmetadata: {{name: {name}}}\n\
             spec:\n  target: {{endpoint: {{protocol: nats, url: \"nats://127.0.0.1:4222\"}}}}\n  \
             workload: {{protocol: nats, durationSeconds: 5}}\n  runners:\n    count: 1{image}\n"
        )
    };
    kinds::create(&ctx.client, &bare, &manifest("no-secret", None)).await?;
    kinds::create(
        &ctx.client,
        &ctx.ns,
        &manifest("no-such-tag", Some(&missing)),
    )
    .await?;
    let in_ns = |ns: &str| TestContext {
        client: ctx.client.clone(),
        ns: ns.to_string(),
        test: ctx.test.clone(),
    };
    // The kubelet's own words: the registry refused us, or has no such tag.
    let cases = [
        (&bare, "no-secret", runner_ref, "401 Unauthorized"),
        (&ctx.ns, "no-such-tag", missing.as_str(), "not found"),
    ];
    for (ns, name, image, why) in cases {
        let br = runs::finished(&in_ns(ns), name, Duration::from_secs(150)).await?;
        let reason = runs::field(&br, "/status/verdict/reason");
        let message = runs::field(&br, "/status/verdict/message").to_string();
        eprintln!("{name}: {reason} after {:?}: {message}", started.elapsed());
        ensure!(
            reason == RunFailureReason::ImagePullFailed.as_str(),
            "{name}: {reason}: {message}"
        );
        ensure!(
            message.contains(image),
            "{name}: the message names {image}: {message}"
        );
        ensure!(
            message.contains(why),
            "{name}: the message says {why:?}: {message}"
        );
    }
    ensure!(
        started.elapsed() < Duration::from_secs(120),
        "pull failures took {:?} to end their runs",
        started.elapsed()
    );
    let _ = Api::<Namespace>::all(ctx.client.clone())
        .delete(&bare, &DeleteParams::background())
        .await;
    Ok(())
}

/// Every pull Secret the README made holds the pull credential, and nothing of the pushing one.
async fn pull_secrets_hold_the_pull_credential(
    ctx: &TestContext,
    reg: &registry::Registry,
) -> Result<()> {
    use base64::Engine;
    let want = format!("{}:{}", reg.pull_user, reg.pull_password);
    for ns in [chart::namespace(), ctx.ns.as_str()] {
        let secret = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(ctx.client.clone(), ns)
            .get("msgbench-pull")
            .await?;
        let data = secret.data.unwrap_or_default();
        let config = data
            .get(".dockerconfigjson")
            .with_context(|| format!("{ns}/msgbench-pull has no .dockerconfigjson"))?;
        let text = String::from_utf8_lossy(&config.0).into_owned();
        let auths: serde_json::Value = serde_json::from_str(&text)?;
        let entries = auths["auths"].as_object().context("no auths")?;
        for (host, entry) in entries {
            let auth = entry["auth"].as_str().unwrap_or_default();
            let decoded = base64::engine::general_purpose::STANDARD.decode(auth)?;
            ensure!(
                decoded == want.as_bytes(),
                "{ns}/msgbench-pull for {host} does not hold the pull credential"
            );
        }
        ensure!(
            !entries.is_empty() && !text.contains(&reg.password),
            "{ns}/msgbench-pull holds the pushing credential"
        );
    }
    eprintln!("pull Secrets hold {} only", reg.pull_user);
    Ok(())
}

async fn create_namespace(ctx: &TestContext, name: &str) -> Result<()> {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                e2e_label().to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(ctx.client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// `kubectl msgbench --context NAME` reads from that context: a kubeconfig whose current
/// context points nowhere, and a context `registry-e2e` on the real cluster in the test's
/// namespace.
async fn plugin_reads_the_named_context(ctx: &TestContext) -> Result<()> {
    let text = std::fs::read_to_string(msgbench_e2e::cluster::kubeconfig_path())?;
    let mut kc: serde_json::Value = serde_norway::from_str(&text)?;
    let current = kc["current-context"]
        .as_str()
        .context("current-context")?
        .to_string();
    let mut named = kc["contexts"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == current.as_str()))
        .cloned()
        .context("the current context")?;
    named["name"] = "registry-e2e".into();
    named["context"]["namespace"] = ctx.ns.clone().into();
    let nowhere = serde_json::json!({"name": "nowhere",
        "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": true}});
    kc["clusters"]
        .as_array_mut()
        .context("clusters")?
        .push(nowhere);
    let contexts = kc["contexts"].as_array_mut().context("contexts")?;
    contexts.push(named);
    let user = contexts[0]["context"]["user"].clone();
    contexts.push(serde_json::json!({"name": "nowhere",
        "context": {"cluster": "nowhere", "user": user}}));
    kc["current-context"] = "nowhere".into();
    let file = std::env::temp_dir().join(format!("{}-kubeconfig.yaml", ctx.ns));
    std::fs::write(&file, serde_norway::to_string(&kc)?)?;
    let plugin = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(registry::plugin_binary());
        cmd.arg("--kubeconfig").arg(&file).args(extra);
        cmd.args(["export", "quickstart", "-o", "json"]).output()
    };
    let named = plugin(&["--context", "registry-e2e"])?;
    let current = plugin(&[])?;
    let _ = std::fs::remove_file(&file);
    ensure!(
        named.status.success() && String::from_utf8_lossy(&named.stdout).contains("quickstart"),
        "--context registry-e2e reads the run in its namespace: {}",
        String::from_utf8_lossy(&named.stderr)
    );
    ensure!(
        !current.status.success(),
        "without --context the plugin must use the current context (nowhere) and fail"
    );
    Ok(())
}
