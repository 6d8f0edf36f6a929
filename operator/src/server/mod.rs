//! Server controller (JetStreamCluster, MqttBroker, PubSubServer), the client half: observe the
//! pods, apply the children `msgbench_operator_core::server::decide::plan` asks for, write the
//! status it settles. It may read and write the API server and read nats-server `/varz` on pod
//! IPs. It may not decide: the plan, validation and status are `msgbench_operator_core::server`'s.
pub mod apply;
pub mod controller;
pub mod reconcile;
pub mod subset;
pub mod varz;
