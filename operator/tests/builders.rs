//! Builders from YAML fixtures: YAML snapshots of every child, plus the properties that must
//! hold for every pod we create (hardening, Guaranteed QoS when pinned, contract labels).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use msgbench_crds::{JetStreamCluster, MqttBroker, PubSubServer, PullSecret};
use msgbench_operator::server::apply::Children;
use msgbench_operator_core::fault_policy::FaultPolicy;
use msgbench_operator_core::meta::Owner;
use msgbench_operator_core::operands::OperandDefaults;
use msgbench_operator_core::server::kind::ManagedServerKind;

fn fixture<K: ManagedServerKind>(file: &str) -> K {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn build<K: ManagedServerKind>(file: &str) -> (K, Children) {
    let obj: K = fixture(file);
    assert!(
        obj.validate().is_empty(),
        "{file} must be valid: {:?}",
        obj.validate()
    );
    let owner = Owner::of(&obj, K::KIND_LABEL).expect("fixture has namespace and uid");
    let children = obj.build(&owner, obj.desired_replicas(), &OperandDefaults::default());
    (obj, children)
}

fn templates(c: &Children) -> Vec<&PodTemplateSpec> {
    let sts = c
        .stateful_sets
        .iter()
        .filter_map(|s| s.spec.as_ref())
        .map(|s| &s.template);
    let deps = c
        .deployments
        .iter()
        .filter_map(|d| d.spec.as_ref())
        .map(|d| &d.template);
    sts.chain(deps).collect()
}

/// Every pod: non-root, RuntimeDefault seccomp, read-only root fs, ALL capabilities dropped.
fn assert_hardened(c: &Children) {
    let t = templates(c);
    assert_eq!(t.len(), 1, "exactly one workload");
    for tpl in t {
        let pod = tpl.spec.as_ref().unwrap();
        let psc = pod.security_context.as_ref().unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert!(psc.run_as_user.unwrap() > 0);
        assert_eq!(
            psc.seccomp_profile.as_ref().unwrap().type_,
            "RuntimeDefault"
        );
        for ctr in pod
            .containers
            .iter()
            .chain(pod.init_containers.iter().flatten())
        {
            let sc = ctr.security_context.as_ref().unwrap();
            assert_eq!(sc.read_only_root_filesystem, Some(true), "{}", ctr.name);
            assert_eq!(sc.allow_privilege_escalation, Some(false));
            assert_eq!(
                sc.capabilities.as_ref().unwrap().drop,
                Some(vec!["ALL".to_string()])
            );
        }
    }
}

/// Guaranteed QoS: requests == limits for CPU and memory in every container, integer CPU.
fn assert_guaranteed(c: &Children) {
    for tpl in templates(c) {
        let pod = tpl.spec.as_ref().unwrap();
        for ctr in pod
            .containers
            .iter()
            .chain(pod.init_containers.iter().flatten())
        {
            let r = ctr.resources.as_ref().expect("resources");
            let (req, lim) = (r.requests.as_ref().unwrap(), r.limits.as_ref().unwrap());
            for k in ["cpu", "memory"] {
                assert!(lim.contains_key(k), "{} has a {k} limit", ctr.name);
                assert_eq!(req.get(k), lim.get(k), "{} {k} request == limit", ctr.name);
            }
            assert!(!lim["cpu"].0.contains('m') && !lim["cpu"].0.contains('.'));
        }
    }
}

fn assert_contract_labels(c: &Children, kind: &str, instance: &str) {
    let json = serde_json::to_value(c).unwrap();
    for (_, list) in json.as_object().unwrap() {
        for obj in list.as_array().unwrap() {
            let labels = &obj["metadata"]["labels"];
            assert_eq!(labels["app.kubernetes.io/name"], kind);
            assert_eq!(labels["app.kubernetes.io/instance"], instance);
            assert_eq!(labels["app.kubernetes.io/component"], "server");
            assert_eq!(labels["app.kubernetes.io/managed-by"], "msgbench-operator");
            assert_eq!(labels["app.kubernetes.io/part-of"], "msgbench");
            let owner = &obj["metadata"]["ownerReferences"][0];
            assert_eq!(owner["controller"], true);
            assert_eq!(owner["kind"], obj_kind(kind));
        }
    }
}

fn env_of(c: &Children) -> std::collections::BTreeMap<String, String> {
    templates(c)[0].spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v)))
        .collect()
}

#[test]
fn jetstream_cluster_of_three() {
    let (_, c) = build::<JetStreamCluster>("jsc-basic.yaml");
    assert_hardened(&c);
    assert_contract_labels(&c, "jetstreamcluster", "demo");
    // Routes with the generated password, composed by the kubelet; the file names variables.
    let conf = &c.config_maps[0].data.as_ref().unwrap()["nats.conf"];
    let env = env_of(&c);
    for i in 0..3 {
        assert!(conf.contains(&format!("    $ROUTE_{i}\n")), "{conf}");
        assert_eq!(
            env[&format!("ROUTE_{i}")],
            format!("nats-route://route:$(ROUTE_PASSWORD)@demo-{i}.demo-headless.bench.svc:6222")
        );
    }
    assert_eq!(c.generated_secrets[0].name(), "demo-routes");
    let sts = c.stateful_sets[0].spec.as_ref().unwrap();
    assert_eq!(sts.pod_management_policy.as_deref(), Some("Parallel"));
    assert_eq!(sts.service_name.as_deref(), Some("demo-headless"));
    // 1500m rounds up to 2 threads.
    assert_eq!(env_of(&c).get("GOMAXPROCS").map(String::as_str), Some("2"));
    insta::assert_yaml_snapshot!("jsc_basic", c);
}

#[test]
fn jetstream_cluster_pinned_with_sysctls_and_auth() {
    let (_, c) = build::<JetStreamCluster>("jsc-pinned.yaml");
    assert_hardened(&c);
    assert_guaranteed(&c);
    let pod = templates(&c)[0].spec.clone().unwrap();
    let sysctls = pod.security_context.unwrap().sysctls.unwrap();
    assert_eq!(sysctls.len(), 2);
    let conf = &c.config_maps[0].data.as_ref().unwrap()["nats.conf"];
    assert!(
        !conf.contains("cluster {"),
        "a single server has no cluster block"
    );
    assert!(conf.contains("user: $NATS_USER"));
    assert_eq!(env_of(&c).get("GOMAXPROCS").map(String::as_str), Some("1"));
    insta::assert_yaml_snapshot!("jsc_pinned", c);
}

#[test]
fn mqtt_broker_mosquitto_deployment() {
    let (_, c) = build::<MqttBroker>("mqb-basic.yaml");
    assert_hardened(&c);
    assert_contract_labels(&c, "mqttbroker", "mosq");
    assert!(c.stateful_sets.is_empty() && c.deployments.len() == 1);
    let conf = &c.config_maps[0].data.as_ref().unwrap()["broker.conf"];
    assert!(
        conf.contains("listener 8083 0.0.0.0\nprotocol websockets"),
        "{conf}"
    );
    insta::assert_yaml_snapshot!("mqb_basic", c);
}

/// `spec.auth`: an init container of the broker's image hashes the Secret's user into the
/// password file the broker reads; hardened like the broker, credentials by reference only.
#[test]
fn mqtt_broker_with_auth_hashes_its_secret_at_pod_start() {
    let (_, c) = build::<MqttBroker>("mqb-auth.yaml");
    assert_hardened(&c);
    assert_contract_labels(&c, "mqttbroker", "mosq-auth");
    let yaml = serde_norway::to_string(&c).unwrap();
    assert!(!yaml.contains("value: "), "no literal env value: {yaml}");
    insta::assert_yaml_snapshot!("mqb_auth", c);
}

#[test]
fn mqtt_broker_pinned_persistent_statefulset() {
    let (_, c) = build::<MqttBroker>("mqb-pinned-persistent.yaml");
    assert_hardened(&c);
    assert_guaranteed(&c);
    assert!(c.deployments.is_empty() && c.stateful_sets.len() == 1);
    insta::assert_yaml_snapshot!("mqb_pinned_persistent", c);
}

#[test]
fn mqtt_broker_custom_engine_renders_its_template() {
    let (_, c) = build::<MqttBroker>("mqb-custom.yaml");
    assert_hardened(&c);
    let conf = &c.config_maps[0].data.as_ref().unwrap()["broker.conf"];
    assert_eq!(conf, "port 1884\nws 8084\nmax 100\n");
    let dep = c.deployments[0].spec.as_ref().unwrap();
    assert_eq!(dep.replicas, Some(2));
    let ctr = &dep.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(ctr.command, Some(vec!["/bin/broker".to_string()]));
    let mount = ctr
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.name == "config")
        .unwrap();
    assert_eq!(mount.mount_path, "/etc/broker/broker.conf");
    insta::assert_yaml_snapshot!("mqb_custom", c);
}

#[test]
fn pubsub_server_contract_env() {
    let (_, c) = build::<PubSubServer>("pss-basic.yaml");
    assert_hardened(&c);
    assert_contract_labels(&c, "pubsubserver", "pubsub");
    let env = env_of(&c);
    assert_eq!(env["EMIT_MODE"], "sequential");
    assert_eq!(env["DATABASE_FILE"], "/data/pubsub.db");
    assert_eq!(env["CACHE_TTL_SECONDS"], "5");
    assert_eq!(env["WORKER_THREADS"], "2");
    // 3/8 of the fixture's 256Mi memory limit.
    assert_eq!(env["MEMORY_BUDGET_BYTES"], (96u64 << 20).to_string());
    assert!(!env.contains_key("WS_MODE"));
    insta::assert_yaml_snapshot!("pss_basic", c);
}

#[test]
fn pubsub_server_pinned_websocket() {
    let (_, c) = build::<PubSubServer>("pss-pinned.yaml");
    assert_hardened(&c);
    assert_guaranteed(&c);
    let env = env_of(&c);
    assert_eq!(
        env["WORKER_THREADS"], "2",
        "explicit tuning.threads wins over the CPU limit"
    );
    assert_eq!(env["WS_MODE"], "broadcast");
    let strategy = c.deployments[0]
        .spec
        .as_ref()
        .unwrap()
        .strategy
        .clone()
        .unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("Recreate"));
    insta::assert_yaml_snapshot!("pss_pinned", c);
}

/// Protocol pusher runs sockudo (the default image swapped) with the app from the Secret by
/// reference only, and nothing external.
#[test]
fn pubsub_server_pusher_runs_sockudo_with_the_app_secret_by_reference() {
    let (pss, c) = build::<PubSubServer>("pss-pusher.yaml");
    assert_hardened(&c);
    assert_eq!(
        pss.client_url(&Owner::of(&pss, "pubsubserver").unwrap()),
        "ws://sockudo.bench.svc:6001"
    );
    let ctr = &templates(&c)[0].spec.as_ref().unwrap().containers[0];
    assert_eq!(
        ctr.image.as_deref(),
        Some(OperandDefaults::default().images.sockudo.as_str())
    );
    let env = env_of(&c);
    assert_eq!(env["PORT"], "6001");
    assert_eq!(env["ADAPTER_DRIVER"], "local");
    assert_eq!(env["RATE_LIMITER_ENABLED"], "false");
    assert_eq!(env["TOKIO_WORKER_THREADS"], "2", "from the CPU limit");
    assert!(
        !env.contains_key("EMIT_MODE"),
        "the reference server's contract does not apply"
    );
    let secret_refs: Vec<(String, String)> = ctr
        .env
        .iter()
        .flatten()
        .filter_map(|e| {
            let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
            assert!(e.value.is_none(), "{} has a value", e.name);
            Some((e.name.clone(), format!("{}/{}", r.name, r.key)))
        })
        .collect();
    assert_eq!(secret_refs.len(), 3, "{secret_refs:?}");
    assert!(secret_refs
        .iter()
        .all(|(_, r)| r.starts_with("sockudo-app/")));
    assert!(
        c.config_maps.is_empty(),
        "no ConfigMap (nothing secret could land in one)"
    );
    insta::assert_yaml_snapshot!("pss_pusher", c);
}

/// TLS: the servers mount the certificate and key (never the CA's key, which they do not
/// have, nor `ca.crt`, which they do not need), read-only and group-readable only; the client
/// URL says `tls://`; the Secret's certificate and CA are referenced from the environment, so
/// a missing Secret or key stops the container with the kubelet naming it (the volume itself is
/// optional: a missing volume shows only in Events).
#[test]
fn jetstream_cluster_with_tls() {
    let (obj, c) = build::<JetStreamCluster>("jsc-tls.yaml");
    assert_hardened(&c);
    let pod = templates(&c)[0].spec.clone().unwrap();
    let tls = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "tls")
        .unwrap();
    let s = tls.secret.unwrap();
    let keys: Vec<String> = s.items.unwrap().into_iter().map(|i| i.key).collect();
    assert_eq!(
        (s.secret_name.as_deref(), keys),
        (
            Some("secure-tls"),
            vec!["tls.crt".to_string(), "tls.key".to_string()]
        )
    );
    assert_eq!(s.default_mode, Some(0o440));
    let m = pod.containers[0].volume_mounts.clone().unwrap();
    assert!(m
        .iter()
        .any(|m| m.name == "tls" && m.mount_path == "/etc/nats/tls" && m.read_only == Some(true)));
    let conf = &c.config_maps[0].data.as_ref().unwrap()["nats.conf"];
    assert!(
        conf.contains("cert_file: \"/etc/nats/tls/tls.crt\""),
        "{conf}"
    );
    let owner = Owner::of(&obj, JetStreamCluster::KIND_LABEL).unwrap();
    assert_eq!(obj.client_url(&owner), "tls://secure.bench.svc:4222");
    assert_eq!(s.optional, Some(true));
    let refs: Vec<(String, String)> = pod.containers[0]
        .env
        .iter()
        .flatten()
        .filter_map(|e| {
            let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
            (r.name == "secure-tls").then(|| (r.key.clone(), format!("{:?}", r.optional)))
        })
        .collect();
    let required = |k: &str| (k.to_string(), "Some(false)".to_string());
    assert_eq!(refs, [required("tls.crt"), required("ca.crt")]);
    insta::assert_yaml_snapshot!("jsc_tls", c);
}

/// The operator's defaults of an install with the chart's `faults.enabled` and
/// `faults.network`: every fault agent allowed.
fn faults_allowed() -> OperandDefaults {
    OperandDefaults {
        faults: FaultPolicy {
            agents: true,
            network: true,
            power_loss: false,
        },
        ..OperandDefaults::default()
    }
}

/// `spec.faultInjection.enabled`: every server pod shares its process namespace with a fault
/// agent that targets nats-server, holds the operator's public key and this server's uid, and
/// is as hardened as the server; without it, neither.
#[test]
fn jetstream_cluster_with_a_fault_agent() {
    let mut obj: JetStreamCluster = fixture("jsc-basic.yaml");
    let owner = Owner::of(&obj, JetStreamCluster::KIND_LABEL).unwrap();
    let operands = OperandDefaults {
        control_public_key: "cHVibGlj".into(),
        ..faults_allowed()
    };
    let pod = |obj: &JetStreamCluster| {
        let c = obj.build(&owner, 3, &operands);
        assert_hardened(&c);
        templates(&c)[0].spec.clone().unwrap()
    };
    let plain = pod(&obj);
    assert_eq!(plain.share_process_namespace, None);
    assert_eq!(plain.containers.len(), 1);
    obj.spec.fault_injection = Some(msgbench_crds::benchmark_run::FaultAgentSpec {
        enabled: true,
        network: false,
        power_loss: false,
    });
    let with = pod(&obj);
    assert_eq!(with.share_process_namespace, Some(true));
    let agent = &with.containers[1];
    assert_eq!(agent.name, "fault-agent");
    assert_eq!(
        agent.image.as_deref(),
        Some(operands.images.bench_runner.as_str())
    );
    let args = agent.args.clone().unwrap();
    assert_eq!(args[..3], ["fault-agent", "--process", "nats-server"]);
    let env: Vec<(String, String)> = (agent.env.iter().flatten())
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    assert!(env.contains(&("MSGBENCH_CONTROL_PUBLIC_KEY".into(), "cHVibGlj".into())));
    assert!(env.contains(&("MSGBENCH_SERVER_UID".into(), owner.owner_ref.uid.clone())));
    let sc = agent.security_context.clone().unwrap();
    assert_eq!((sc.run_as_user, sc.run_as_non_root), (None, Some(true)));
    assert_eq!(
        sc.capabilities.unwrap().add,
        None,
        "signals as the server's user"
    );

    // With network faults: only the agent is root, with NET_ADMIN and KILL, and knows the
    // route and client ports; the server container is unchanged.
    obj.spec.fault_injection.as_mut().unwrap().network = true;
    let net = pod(&obj);
    assert_eq!(net.containers[0], with.containers[0]);
    let agent = &net.containers[1];
    let args = agent.args.clone().unwrap();
    assert_eq!(
        args[5..],
        [
            "--network",
            "--peer-ports",
            "6222",
            "--client-ports",
            "4222"
        ]
    );
    let sc = agent.security_context.clone().unwrap();
    assert_eq!((sc.run_as_user, sc.run_as_non_root), (Some(0), Some(false)));
    let caps = sc.capabilities.unwrap().add.unwrap();
    assert_eq!(caps, ["NET_ADMIN", "KILL"]);
}

/// The fault agent's port is reachable only from the operator's pods, in the server's one
/// fenced policy: no rule admits any port from everywhere (the agent's own policy once did),
/// with or without the agent, with or without a known operator.
#[test]
fn the_fault_agent_port_admits_only_the_operator() {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use msgbench_operator_core::run::runners::runner_access::OperatorPeer;
    let mut obj: JetStreamCluster = fixture("jsc-basic.yaml");
    let owner = Owner::of(&obj, JetStreamCluster::KIND_LABEL).unwrap();
    let peer = OperatorPeer::parse("msgbench-system", "app.kubernetes.io/name=msgbench").unwrap();
    let known = OperandDefaults {
        operator_peer: Some(peer),
        ..faults_allowed()
    };
    let agent = |c: &Children| {
        let spec = c.network_policies[0].spec.clone().unwrap();
        assert_eq!(
            spec.pod_selector.clone().unwrap().match_labels,
            Some(owner.selector_labels())
        );
        let rules = spec.ingress.unwrap();
        assert!(
            rules
                .iter()
                .all(|r| r.from.as_ref().is_some_and(|f| !f.is_empty())),
            "every rule names its sources: {rules:?}"
        );
        (rules.into_iter())
            .find(|r| (r.ports.iter().flatten()).any(|p| p.port == Some(IntOrString::Int(9091))))
    };
    assert!(
        agent(&obj.build(&owner, 3, &known)).is_none(),
        "no agent, no port"
    );
    obj.spec.fault_injection = Some(msgbench_crds::benchmark_run::FaultAgentSpec {
        enabled: true,
        network: false,
        power_loss: false,
    });
    let with = obj.build(&owner, 3, &known);
    let rule = agent(&with).expect("the agent's port");
    assert_eq!(rule.ports.as_ref().unwrap().len(), 1, "that port alone");
    let from = rule.from.unwrap();
    assert_eq!(from.len(), 1, "the operator alone");
    let ns = from[0]
        .namespace_selector
        .clone()
        .unwrap()
        .match_labels
        .unwrap();
    assert_eq!(ns["kubernetes.io/metadata.name"], "msgbench-system");
    assert_eq!(
        from[0].pod_selector.clone().unwrap().match_labels.unwrap()["app.kubernetes.io/name"],
        "msgbench"
    );
    let unknown = obj.build(&owner, 3, &faults_allowed());
    assert!(agent(&unknown).is_none(), "no operator known: closed");
}

/// The chart decides which agents a server's `spec.faultInjection` gets: none without
/// `faults.enabled`, none with `network` unless `faults.network` too. A refused agent leaves
/// the pods exactly as without `spec.faultInjection` (and so no agent port in the server's fence).
#[test]
fn fault_agents_only_where_the_install_allows_them() {
    use msgbench_crds::benchmark_run::FaultAgentSpec;
    let policy = |agents, network| OperandDefaults {
        faults: FaultPolicy {
            agents,
            network,
            power_loss: false,
        },
        ..OperandDefaults::default()
    };
    let asking = |enabled, network| {
        let mut jsc: JetStreamCluster = fixture("jsc-basic.yaml");
        jsc.spec.fault_injection = Some(FaultAgentSpec {
            enabled,
            network,
            power_loss: false,
        });
        let mut mqb: MqttBroker = fixture("mqb-basic.yaml");
        mqb.spec.fault_injection = Some(FaultAgentSpec {
            enabled,
            network,
            power_loss: false,
        });
        (jsc, mqb)
    };
    // (containers, template) of each kind's pod.
    let pods = |(jsc, mqb): &(JetStreamCluster, MqttBroker), operands: &OperandDefaults| {
        let j = jsc.build(&Owner::of(jsc, "jetstreamcluster").unwrap(), 3, operands);
        let m = mqb.build(&Owner::of(mqb, "mqttbroker").unwrap(), 1, operands);
        [j, m].map(|c| c.template().unwrap().clone())
    };
    let plain = pods(
        &(fixture("jsc-basic.yaml"), fixture("mqb-basic.yaml")),
        &faults_allowed(),
    );
    let names = |t: &PodTemplateSpec| -> Vec<String> {
        (t.spec.iter().flat_map(|s| &s.containers))
            .map(|c| c.name.clone())
            .collect()
    };
    for (what, spec, operands) in [
        ("faults off", asking(true, false), policy(false, false)),
        (
            "faults off, network asked",
            asking(true, true),
            policy(false, true),
        ),
        (
            "network asked, only faults.enabled",
            asking(true, true),
            policy(true, false),
        ),
    ] {
        // The server's fence follows the template: the same pods, no agent port in it.
        let built = pods(&spec, &operands);
        assert_eq!(built, plain, "{what}: pods as without spec.faultInjection");
    }
    let crash_only = pods(&asking(true, false), &policy(true, false));
    for t in &crash_only {
        assert_eq!(names(t)[1], "fault-agent");
        let agent = &t.spec.as_ref().unwrap().containers[1];
        assert!(!agent.args.iter().flatten().any(|a| a == "--network"));
    }
    let network = pods(&asking(true, true), &policy(true, true));
    for t in &network {
        let agent = &t.spec.as_ref().unwrap().containers[1];
        assert!(agent.args.iter().flatten().any(|a| a == "--network"));
    }
}

#[test]
fn held_workload_builds_zero_replicas() {
    let obj: JetStreamCluster = fixture("jsc-basic.yaml");
    let owner = Owner::of(&obj, JetStreamCluster::KIND_LABEL).unwrap();
    let c = obj.build(&owner, 0, &OperandDefaults::default());
    assert_eq!(c.stateful_sets[0].spec.as_ref().unwrap().replicas, Some(0));
}

fn obj_kind(label: &str) -> &'static str {
    match label {
        "jetstreamcluster" => "JetStreamCluster",
        "mqttbroker" => "MqttBroker",
        _ => "PubSubServer",
    }
}

/// What a spec leaves open comes from the operator's configuration (the chart's `images` and
/// `serverPods`), the CR's `spec.pod` adds to it, and the selector labels never move.
fn assert_defaults_and_additions<K: ManagedServerKind>(file: &str, default_image: &str) {
    let mut operands = OperandDefaults::default();
    operands.images.nats = "r.example/x/msgbench/nats-server:2.15.2".into();
    operands.images.mosquitto = "r.example/x/msgbench/mosquitto:2.0.11-1.2_deb12u2".into();
    operands.images.pubsub_server = "r.example/x/msgbench/pubsub-server:0.1.0".into();
    operands.image_pull_policy = "Always".into();
    operands.server_pods.image_pull_secrets = vec![PullSecret {
        name: "chart-pull".into(),
    }];
    operands.server_pods.priority_class_name = Some("servers".into());
    let obj: K = fixture(file);
    let owner = Owner::of(&obj, K::KIND_LABEL).unwrap();
    let plain = obj.build(&owner, 1, &operands);
    let tpl = templates(&plain)[0].clone();
    let pod = tpl.spec.as_ref().unwrap();
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some(default_image),
        "{file}"
    );
    assert_eq!(
        pod.containers[0].image_pull_policy.as_deref(),
        Some("Always")
    );
    assert_eq!(
        pod.image_pull_secrets.as_ref().unwrap()[0].name,
        "chart-pull"
    );
    assert_eq!(pod.priority_class_name.as_deref(), Some("servers"));

    // The same object with additions of its own.
    let mut value = serde_json::to_value(&obj).unwrap();
    value["spec"]["pod"] = serde_json::json!({
        "labels": {"team": "platform"},
        "annotations": {"example.com/owner": "bench"},
        "imagePullSecrets": [{"name": "own-pull"}],
        "serviceAccountName": "servers-sa"
    });
    let custom: K = serde_json::from_value(value).unwrap();
    let c = custom.build(&owner, 1, &operands);
    let t = templates(&c)[0];
    let meta = t.metadata.as_ref().unwrap();
    assert_eq!(meta.labels.as_ref().unwrap()["team"], "platform");
    for (k, v) in owner.labels() {
        assert_eq!(meta.labels.as_ref().unwrap().get(&k), Some(&v), "{k}");
    }
    assert_eq!(
        meta.annotations.as_ref().unwrap()["example.com/owner"],
        "bench"
    );
    let pod = t.spec.as_ref().unwrap();
    let secrets: Vec<&str> = pod
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(secrets, ["chart-pull", "own-pull"]);
    assert_eq!(pod.service_account_name.as_deref(), Some("servers-sa"));
    assert_eq!(pod.automount_service_account_token, Some(false));
    // A change of additions is a new template: the pods roll to it.
    let hash = |t: &PodTemplateSpec| {
        t.metadata.as_ref().unwrap().annotations.as_ref().unwrap()["msgbench.dev/template-hash"]
            .clone()
    };
    assert_ne!(hash(&tpl), hash(t));
}

#[test]
fn server_pods_take_the_operators_default_image_and_their_pod_additions() {
    assert_defaults_and_additions::<JetStreamCluster>(
        "jsc-basic.yaml",
        "r.example/x/msgbench/nats-server:2.15.2",
    );
    assert_defaults_and_additions::<MqttBroker>(
        "mqb-basic.yaml",
        "r.example/x/msgbench/mosquitto:2.0.11-1.2_deb12u2",
    );
    assert_defaults_and_additions::<PubSubServer>(
        "pss-basic.yaml",
        "r.example/x/msgbench/pubsub-server:0.1.0",
    );
}
