//! MqttBroker controller: mosquitto (default), rumqttd or a custom image.
//! May: build objects and broker configuration from the spec (pure). May not: call the API
//! server (the operator's `server::reconcile` applies what `build` returns).

pub mod broker_conf;
pub mod build;

pub use broker_conf::serves_tls;

use crate::meta::Owner;
use crate::operands::OperandDefaults;
use crate::server::children::Children;
use crate::server::kind::ManagedServerKind;
use crate::server::validate::{check_tuning, SpecViolation};
use msgbench_crds::common::{Resources, ServerStatus, Tuning};
use msgbench_crds::mqtt_broker::{MqttBroker, MqttEngine};

impl ManagedServerKind for MqttBroker {
    const KIND_LABEL: &'static str = "mqttbroker";

    fn server_status(&self) -> Option<&ServerStatus> {
        self.status.as_ref()
    }
    fn tuning(&self) -> &Tuning {
        &self.spec.tuning
    }
    fn resources(&self) -> &Resources {
        &self.spec.resources
    }
    fn desired_replicas(&self) -> i32 {
        self.spec.replicas
    }
    fn validate(&self) -> Vec<SpecViolation> {
        validate(self)
    }
    fn build(&self, owner: &Owner, replicas: i32, operands: &OperandDefaults) -> Children {
        build::build(self, owner, replicas, operands)
    }
    fn fault_injection(&self) -> Option<&msgbench_crds::benchmark_run::FaultAgentSpec> {
        self.spec.fault_injection.as_ref()
    }
    fn client_url(&self, owner: &Owner) -> String {
        let scheme = if serves_tls(&self.spec) {
            "mqtts"
        } else {
            "mqtt"
        };
        format!(
            "{scheme}://{}.{}.svc:{}",
            owner.name, owner.namespace, self.spec.listeners.mqtt_port
        )
    }
    fn configured_threads(&self) -> Option<u16> {
        match self.spec.engine {
            // mosquitto runs one event loop thread whatever the CPU limit.
            MqttEngine::Mosquitto => Some(1),
            MqttEngine::Rumqttd | MqttEngine::Custom => self.spec.tuning.threads,
        }
    }
}

pub fn validate(mqb: &MqttBroker) -> Vec<SpecViolation> {
    let spec = &mqb.spec;
    let mut v = Vec::new();
    let agent = spec.fault_injection.as_ref().is_some_and(|f| f.enabled);
    if agent && spec.engine == MqttEngine::Custom {
        v.push(SpecViolation::invalid(
            "spec.faultInjection.enabled",
            "needs engine mosquitto or rumqttd (a custom engine's process is not known)",
        ));
    }
    if !(1..=5).contains(&spec.replicas) {
        v.push(SpecViolation::invalid(
            "spec.replicas",
            "must be between 1 and 5",
        ));
    }
    if spec.replicas > 1 && spec.engine != MqttEngine::Custom {
        v.push(SpecViolation::invalid(
            "spec.replicas",
            "engines mosquitto and rumqttd do not cluster; replicas must be 1",
        ));
    }
    if spec.engine == MqttEngine::Custom && spec.image.is_none() {
        v.push(SpecViolation::invalid(
            "spec.image",
            "engine custom needs an image",
        ));
    }
    if spec.engine != MqttEngine::Custom && spec.custom.is_some() {
        v.push(SpecViolation::invalid(
            "spec.custom",
            "only valid with engine custom",
        ));
    }
    if spec.auth.is_some() && spec.engine != MqttEngine::Mosquitto {
        v.push(SpecViolation::invalid(
            "spec.auth",
            "only valid with engine mosquitto (the operator writes only mosquitto's password file)",
        ));
    }
    if spec.tls.is_some() && spec.engine != MqttEngine::Mosquitto {
        v.push(SpecViolation::invalid(
            "spec.tls",
            "only valid with engine mosquitto (the operator configures TLS only for mosquitto's listeners)",
        ));
    }
    if spec
        .listeners
        .websocket
        .as_ref()
        .is_some_and(|w| w.port == spec.listeners.mqtt_port)
    {
        v.push(SpecViolation::invalid(
            "spec.listeners.websocket.port",
            "must differ from listeners.mqttPort",
        ));
    }
    v.extend(check_tuning(&spec.tuning, &spec.resources));
    v
}
