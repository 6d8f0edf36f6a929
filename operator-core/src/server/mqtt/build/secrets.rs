//! What the broker pod takes from the user's Secrets, by reference only (the operator never
//! reads them): mosquitto's password file and the TLS certificate.
use super::super::broker_conf::{
    serves_tls, MOSQUITTO_AUTH_DIR, MOSQUITTO_PASSWORD_FILE, MOSQUITTO_TLS_DIR,
};
use crate::server_pod::{empty_dir, mount, optional_secret_volume, secret_env, tls_env};
use k8s_openapi::api::core::v1::{Container, EnvVar, Volume, VolumeMount};
use msgbench_crds::mqtt_broker::{MqttBrokerSpec, MqttEngine};

const AUTH_VOLUME: &str = "auth";
const TLS_VOLUME: &str = "tls";
/// mosquitto_passwd where both the official image (Alpine) and Debian's package put it.
pub const MOSQUITTO_PASSWD: &str = "/usr/bin/mosquitto_passwd";

/// With `auth`, the init container that hashes the user into the password file, and its
/// in-memory volume; with `tls` (`broker_conf::serves_tls`), `tls.crt` and `tls.key` mounted
/// read-only (never `ca.crt`: clients present no certificate) and environment references to
/// the public parts, through which the kubelet names a missing Secret or key in the container
/// status (`server_pod::tls_env`). Returns the init containers and the environment.
pub(super) fn secret_material(
    spec: &MqttBrokerSpec,
    image: &str,
    volumes: &mut Vec<Volume>,
    mounts: &mut Vec<VolumeMount>,
) -> (Vec<Container>, Vec<EnvVar>) {
    let mut init = Vec::new();
    if let Some(a) = (spec.auth.as_ref()).filter(|_| spec.engine == MqttEngine::Mosquitto) {
        volumes.push(empty_dir(AUTH_VOLUME, true));
        mounts.push(mount(AUTH_VOLUME, MOSQUITTO_AUTH_DIR, true));
        init.push(password_file(image, &a.secret_name));
    }
    let mut env = Vec::new();
    if let Some(t) = (spec.tls.as_ref()).filter(|_| serves_tls(spec)) {
        let keys = ["tls.crt", "tls.key"];
        volumes.push(optional_secret_volume(TLS_VOLUME, &t.secret_name, &keys));
        mounts.push(mount(TLS_VOLUME, MOSQUITTO_TLS_DIR, true));
        env.extend(tls_env(&t.secret_name));
    }
    (init, env)
}

/// Hashes the Secret's user into mosquitto's password file, in the broker's image before the
/// broker starts. The credentials come from the Secret through `secretKeyRef` and reach the
/// command line by the kubelet's `$(VAR)` expansion: the pod spec names only the variables,
/// the operator never reads the Secret, and the file holds a salted hash. A missing Secret or
/// key stops this container with the kubelet naming it, which the server's status reports.
fn password_file(image: &str, secret: &str) -> Container {
    Container {
        name: "password-file".into(),
        image: Some(image.into()),
        command: Some(
            [
                MOSQUITTO_PASSWD,
                "-b",
                "-c",
                MOSQUITTO_PASSWORD_FILE,
                "$(MQTT_USERNAME)",
                "$(MQTT_PASSWORD)",
            ]
            .map(String::from)
            .to_vec(),
        ),
        env: Some(vec![
            secret_env("MQTT_USERNAME", secret, "username"),
            secret_env("MQTT_PASSWORD", secret, "password"),
        ]),
        volume_mounts: Some(vec![mount(AUTH_VOLUME, MOSQUITTO_AUTH_DIR, false)]),
        ..Container::default()
    }
}
