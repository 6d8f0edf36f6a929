use super::*;
use crate::run::model::Resolved;
use kube::Resource;
use msgbench_crds::jetstream_cluster::{NatsAuth, NatsAuthMode};

fn run(workload: &str, extra: &str) -> BenchmarkRun {
    serde_norway::from_str(&format!(
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: r1, namespace: bench, uid: 0a1b2c3d-4e5f-6789-abcd-ef0123456789, generation: 3}}
spec:
  target: {{serverRef: {{kind: JetStreamCluster, name: js3}}}}
  workload: {workload}
  runners: {{count: 1}}
  {extra}"#
    ))
    .unwrap()
}

fn id(br: &BenchmarkRun) -> RunIdentity {
    RunIdentity {
        owner: crate::meta::Owner {
            kind_label: KIND_LABEL,
            name: "r1".into(),
            namespace: "bench".into(),
            owner_ref: br.controller_owner_ref(&()).unwrap(),
        },
        generation: 3,
    }
}

fn seen(url: &str, auth: Option<TargetSecret>, tls: Option<&str>) -> TargetSeen {
    TargetSeen {
        variant: None,
        resolved: Ok(Resolved {
            url: url.into(),
            display: "JetStreamCluster/js3".into(),
            not_ready: None,
            server_labels: None,
            environment: None,
            auth,
            tls: tls.map(TlsSource::server_secret),
            unfit: None,
            fault_agent: None,
            fault_agent_refused: None,
        }),
        unreachable: None,
    }
}

const JS: &str = "{protocol: jetstream}";

#[test]
fn only_runs_that_create_their_own_streams_have_streams_to_delete() {
    assert!(creates_streams(&run(JS, "").spec));
    let existing = "{protocol: jetstream, jetstream: {stream: s, createStream: false}}";
    assert!(!creates_streams(&run(existing, "").spec));
    assert!(!creates_streams(&run("{protocol: nats}", "").spec));
    let variant = "variants: [{name: js, workload: {protocol: jetstream}}]";
    assert!(creates_streams(&run("{protocol: nats}", variant).spec));
}

#[test]
fn the_run_id_is_the_one_in_its_stream_names() {
    let br = run(JS, "");
    let uid = &id(&br).owner_ref.uid;
    assert_eq!(run_id(uid), "0a1b2c3d");
    let iso = crate::run::runners::build::run_isolation(uid, 3);
    assert!(iso
        .stream("bench", 2)
        .contains(&format!("_{}", run_id(uid).to_uppercase())));
}

#[test]
fn the_sweep_job_deletes_by_run_id_with_credentials_by_reference_only() {
    let br = run(JS, "");
    let auth = TargetSecret::Nats(NatsAuth {
        secret_name: "js3-auth".into(),
        mode: NatsAuthMode::UserPassword,
    });
    let seen = [
        seen("tls://js3.bench.svc:4222", Some(auth), Some("js3-tls")),
        seen("tls://js3.bench.svc:4222", None, None), // a variant on the same server
        seen("mqtt://m.bench.svc:1883", None, None),
    ];
    let to_sweep = targets(&seen);
    assert_eq!(
        to_sweep.len(),
        1,
        "each JetStream server once, nothing else"
    );
    let job = job(&br, &id(&br), &to_sweep, &OperandDefaults::default());
    assert_eq!(job.metadata.name.as_deref(), Some("r1-streams"));
    assert!(
        job.metadata.owner_references.is_none(),
        "outlives a foreground deletion"
    );
    let labels = job.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[LABEL_RUN_UID], id(&br).owner_ref.uid);
    assert_eq!(labels[LABEL_COMPONENT], COMPONENT);
    let spec = job.spec.as_ref().unwrap();
    assert!(spec.active_deadline_seconds.is_some() && spec.ttl_seconds_after_finished.is_some());
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.automount_service_account_token, Some(false));
    let c = &pod.containers[0];
    assert_eq!(
        c.args.as_deref().unwrap(),
        [
            "delete-streams",
            "--url",
            "tls://js3.bench.svc:4222",
            "--run",
            "0a1b2c3d",
            "--ca-file",
            "/etc/msgbench/tls/0/ca.crt"
        ]
    );
    let env: Vec<(&str, &str, &str)> = (c.env.iter().flatten())
        .map(|e| {
            assert!(e.value.is_none(), "never a value in the pod spec");
            let r = e
                .value_from
                .as_ref()
                .unwrap()
                .secret_key_ref
                .as_ref()
                .unwrap();
            (e.name.as_str(), r.name.as_str(), r.key.as_str())
        })
        .collect();
    assert_eq!(
        env,
        [
            ("MSGBENCH_USERNAME", "js3-auth", "username"),
            ("MSGBENCH_PASSWORD", "js3-auth", "password")
        ]
    );
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    let ca = &pod.volumes.as_ref().unwrap()[0];
    let sources = ca.projected.as_ref().unwrap().sources.as_ref().unwrap();
    assert_eq!(sources[0].secret.as_ref().unwrap().name, "js3-tls");
}

#[test]
fn a_deleted_run_waits_for_its_sweep_but_not_forever() {
    let mut br = run(JS, "");
    br.metadata.finalizers = Some(vec![FINALIZER.into()]);
    let (id, ops) = (id(&br), OperandDefaults::default());
    let target = [seen("nats://js3.bench.svc:4222", None, None)];
    let soon = Duration::from_secs(5);
    let step = on_delete(&br, &id, soon, true, &target, None, &ops);
    assert_eq!(
        step,
        StreamsStep::StopRunners,
        "a runner still running could make another stream, and garbage collection waits for \
         the run"
    );
    let step = on_delete(&br, &id, soon, false, &target, None, &ops);
    assert!(matches!(step, StreamsStep::Sweep(..)), "{step:?}");
    let step = on_delete(&br, &id, DELETE_WAIT, true, &target, None, &ops);
    assert!(matches!(step, StreamsStep::Release(false, ..)), "{step:?}");
    let running = Some(&SweepSeen::Running);
    assert_eq!(
        on_delete(&br, &id, soon, false, &target, running, &ops),
        StreamsStep::Wait
    );
    let StreamsStep::Release(false, reason, why) =
        on_delete(&br, &id, DELETE_WAIT, false, &target, running, &ops)
    else {
        panic!("released past the wait");
    };
    assert_eq!(reason, REASON_NOT_DELETED);
    assert!(why.contains("0a1b2c3d may remain"), "{why}");
    let ended = SweepSeen::Ended {
        deleted: true,
        message: "deleted 1 stream".into(),
    };
    assert_eq!(
        on_delete(&br, &id, soon, false, &target, Some(&ended), &ops),
        StreamsStep::Release(true, REASON_DELETED, "deleted 1 stream".into())
    );
    br.metadata.finalizers = None;
    assert_eq!(
        on_delete(&br, &id, soon, false, &target, None, &ops),
        StreamsStep::Nothing
    );
}

#[test]
fn a_long_run_name_still_makes_a_valid_job_name() {
    let name = "a".repeat(63);
    assert_eq!(job_name(&name).len(), 63);
    assert!(job_name(&name).ends_with("-streams"));
}
