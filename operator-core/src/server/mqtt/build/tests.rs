//! The broker's children from small specs: auth, TLS and the engines that serve neither.
use super::config_map::CONFIG_KEY;
use super::*;
use crate::server::kind::ManagedServerKind;
use crate::server::mqtt::broker_conf::{MOSQUITTO_AUTH_DIR, MOSQUITTO_TLS_DIR};
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn built(spec: &str) -> (MqttBroker, Children) {
    let mqb: MqttBroker = serde_norway::from_str(&format!(
        "apiVersion: msgbench.dev/v1alpha1\nkind: MqttBroker\n\
         metadata: {{name: mq, namespace: bench, uid: u1}}\nspec: {spec}\n"
    ))
    .unwrap();
    let owner = Owner::of(&mqb, MqttBroker::KIND_LABEL).unwrap();
    let c = mqb.build(&owner, 1, &OperandDefaults::default());
    (mqb, c)
}

/// With `auth`: mosquitto refuses anonymous clients and reads a password file that an init
/// container of the same image hashes from the Secret, referenced by name only; the broker
/// mounts it read-only and the ConfigMap names the file, never the Secret or a credential.
#[test]
fn auth_hashes_the_secret_into_a_password_file_at_pod_start() {
    let (mqb, c) = built("{auth: {secretName: mq-user}}");
    assert!(mqb.validate().is_empty(), "{:?}", mqb.validate());
    let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
    assert!(
        conf.contains("allow_anonymous false\npassword_file /mosquitto/auth/passwd\n"),
        "{conf}"
    );
    assert!(!conf.contains("mq-user") && !conf.contains("allow_anonymous true"));
    let pod = c.template().unwrap().spec.clone().unwrap();
    let [init] = pod.init_containers.as_deref().unwrap() else {
        panic!("one init container")
    };
    let broker = &pod.containers[0];
    assert_eq!(init.image, broker.image, "the broker's own image");
    assert_eq!(init.security_context, broker.security_context);
    assert_eq!(init.resources, broker.resources, "the pod keeps its QoS");
    let cmd = init.command.clone().unwrap();
    assert_eq!(cmd[0], MOSQUITTO_PASSWD);
    assert_eq!(&cmd[4..], ["$(MQTT_USERNAME)", "$(MQTT_PASSWORD)"]);
    let refs: Vec<(&str, &str, &str)> = (init.env.iter().flatten())
        .map(|e| {
            assert!(e.value.is_none(), "{} has a value", e.name);
            let r = e.value_from.as_ref().unwrap().secret_key_ref.as_ref();
            let r = r.unwrap();
            (e.name.as_str(), r.name.as_str(), r.key.as_str())
        })
        .collect();
    assert_eq!(
        refs,
        [
            ("MQTT_USERNAME", "mq-user", "username"),
            ("MQTT_PASSWORD", "mq-user", "password")
        ]
    );
    let mounted = |c: &Container| {
        let m = c.volume_mounts.iter().flatten().find(|m| m.name == "auth");
        m.map(|m| (m.mount_path.clone(), m.read_only == Some(true)))
    };
    assert_eq!(mounted(init), Some((MOSQUITTO_AUTH_DIR.into(), false)));
    assert_eq!(mounted(broker), Some((MOSQUITTO_AUTH_DIR.into(), true)));
    let vol = pod.volumes.iter().flatten().find(|v| v.name == "auth");
    let medium = vol.and_then(|v| v.empty_dir.as_ref()?.medium.clone());
    assert_eq!(
        medium.as_deref(),
        Some("Memory"),
        "the hash never hits disk"
    );
}

/// Without `auth` nothing changes: anonymous clients, no init container.
#[test]
fn without_auth_the_broker_admits_anonymous_clients() {
    let (_, c) = built("{}");
    let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
    assert!(conf.contains("allow_anonymous true\n") && !conf.contains("password_file"));
    let pod = c.template().unwrap().spec.clone().unwrap();
    assert!(pod.init_containers.is_none());
    assert!(!pod.volumes.iter().flatten().any(|v| v.name == "auth"));
}

/// Only mosquitto's password file is written: another engine with `auth` is refused (the
/// CRD's rule says the same) and built without it.
#[test]
fn auth_on_another_engine_is_refused() {
    let (mqb, c) = built("{engine: rumqttd, auth: {secretName: mq-user}}");
    let v = mqb.validate();
    assert!(v.iter().any(|v| v.field == "spec.auth"), "{v:?}");
    let pod = c.template().unwrap().spec.clone().unwrap();
    assert!(pod.init_containers.is_none());
}

/// With `tls`: the MQTT listener serves TLS with the certificate and key of the Secret,
/// mounted read-only (never `ca.crt`, never the Secret's name in the ConfigMap), the kubelet
/// checks the Secret through references to its public parts, the probes stay TCP on the
/// same port, and the client URL says `mqtts://`.
#[test]
fn tls_serves_the_secrets_certificate_on_the_mqtt_listener() {
    let (mqb, c) = built("{tls: {secretName: mq-tls}}");
    assert!(mqb.validate().is_empty(), "{:?}", mqb.validate());
    let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
    assert!(
        conf.contains(
            "listener 1883 0.0.0.0\nprotocol mqtt\n\
             certfile /mosquitto/tls/tls.crt\nkeyfile /mosquitto/tls/tls.key\n"
        ),
        "{conf}"
    );
    assert!(
        !conf.contains("mq-tls") && !conf.contains("cafile"),
        "{conf}"
    );
    let pod = c.template().unwrap().spec.clone().unwrap();
    let vol = pod.volumes.iter().flatten().find(|v| v.name == "tls");
    let secret = vol.and_then(|v| v.secret.clone()).expect("a Secret volume");
    let keys: Vec<String> = secret
        .items
        .iter()
        .flatten()
        .map(|i| i.key.clone())
        .collect();
    assert_eq!(secret.secret_name.as_deref(), Some("mq-tls"));
    assert_eq!(keys, ["tls.crt", "tls.key"], "the key and certificate only");
    assert_eq!(secret.default_mode, Some(0o440), "the pod's group only");
    let broker = &pod.containers[0];
    let m = broker
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "tls");
    let m = m.expect("mounted in the broker");
    assert_eq!(m.mount_path, MOSQUITTO_TLS_DIR);
    assert_eq!(m.read_only, Some(true));
    let refs: Vec<(&str, &str)> = (broker.env.iter().flatten())
        .filter_map(|e| {
            let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
            (r.name == "mq-tls").then_some((e.name.as_str(), r.key.as_str()))
        })
        .collect();
    assert_eq!(
        refs,
        [
            ("MSGBENCH_TLS_CERT", "tls.crt"),
            ("MSGBENCH_TLS_CA", "ca.crt")
        ]
    );
    let tcp = |p: &Option<Probe>| p.as_ref()?.tcp_socket.as_ref().map(|t| t.port.clone());
    for p in [
        &broker.startup_probe,
        &broker.readiness_probe,
        &broker.liveness_probe,
    ] {
        assert_eq!(tcp(p), Some(IntOrString::String("mqtt".into())));
    }
    let owner = Owner::of(&mqb, MqttBroker::KIND_LABEL).unwrap();
    assert_eq!(mqb.client_url(&owner), "mqtts://mq.bench.svc:1883");
}

/// A WebSocket listener serves TLS too: no plain way into a broker that requires TLS.
#[test]
fn tls_covers_the_websocket_listener_too() {
    let (_, c) = built("{tls: {secretName: mq-tls}, listeners: {websocket: {port: 8083}}}");
    let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
    assert!(
        conf.contains(
            "listener 8083 0.0.0.0\nprotocol websockets\n\
             certfile /mosquitto/tls/tls.crt\nkeyfile /mosquitto/tls/tls.key\n"
        ),
        "{conf}"
    );
    assert_eq!(conf.matches("certfile ").count(), 2, "{conf}");
}

/// TLS and a login together: the password file's init container as without TLS (it needs
/// no certificate), the TLS listener, and still no anonymous clients.
#[test]
fn tls_and_auth_together() {
    let (mqb, c) = built("{auth: {secretName: mq-user}, tls: {secretName: mq-tls}}");
    assert!(mqb.validate().is_empty(), "{:?}", mqb.validate());
    let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
    assert!(conf.contains("keyfile /mosquitto/tls/tls.key\n"), "{conf}");
    assert!(
        conf.contains("allow_anonymous false\npassword_file "),
        "{conf}"
    );
    let pod = c.template().unwrap().spec.clone().unwrap();
    let [init] = pod.init_containers.as_deref().unwrap() else {
        panic!("one init container")
    };
    let mounts: Vec<&str> = (init.volume_mounts.iter().flatten())
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(mounts, ["auth"]);
    let broker_mounts: Vec<&str> = (pod.containers[0].volume_mounts.iter().flatten())
        .map(|m| m.name.as_str())
        .collect();
    assert!(broker_mounts.contains(&"auth") && broker_mounts.contains(&"tls"));
}

/// Without `tls` nothing of it appears, and the URL stays `mqtt://`.
#[test]
fn without_tls_the_broker_is_plain() {
    let (mqb, c) = built("{listeners: {websocket: {port: 8083}}}");
    let conf = &c.config_maps[0].data.as_ref().unwrap()[CONFIG_KEY];
    assert!(
        !conf.contains("certfile") && !conf.contains("keyfile"),
        "{conf}"
    );
    let pod = c.template().unwrap().spec.clone().unwrap();
    assert!(!pod.volumes.iter().flatten().any(|v| v.name == "tls"));
    assert!(pod.containers[0].env.is_none());
    let owner = Owner::of(&mqb, MqttBroker::KIND_LABEL).unwrap();
    assert_eq!(mqb.client_url(&owner), "mqtt://mq.bench.svc:1883");
}

/// Only mosquitto's listeners are configured: another engine with `tls` is refused (the
/// CRD's rule says the same) and built without it, advertising no `mqtts://` it would not
/// serve.
#[test]
fn tls_on_another_engine_is_refused() {
    let (mqb, c) = built("{engine: rumqttd, tls: {secretName: mq-tls}}");
    let v = mqb.validate();
    assert!(v.iter().any(|v| v.field == "spec.tls"), "{v:?}");
    let pod = c.template().unwrap().spec.clone().unwrap();
    assert!(!pod.volumes.iter().flatten().any(|v| v.name == "tls"));
    let owner = Owner::of(&mqb, MqttBroker::KIND_LABEL).unwrap();
    assert_eq!(mqb.client_url(&owner), "mqtt://mq.bench.svc:1883");
}
