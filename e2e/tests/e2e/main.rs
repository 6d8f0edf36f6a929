//! The whole e2e suite as one test binary: each module is one former `tests/<name>.rs`, so a
//! test is `module::test_name` (`cargo test -p msgbench-e2e --test e2e -- faults::`). One
//! binary links kube and the workspace once instead of 31 times. `make e2e` runs it through
//! cargo-nextest, one process per test (.config/nextest.toml; e2e/README.md, "The suite").
mod benchmark_run;
mod benchmark_run_failures;
mod benchmark_run_server_usage;
mod benchmark_run_transients;
mod canonical_quantities;
mod ci_gate;
mod cluster_smoke;
mod crash_fault;
mod endpoint_mqtts;
mod endpoint_nats_creds;
mod endpoint_wss;
mod faults;
mod faults_disabled;
mod finished_runs;
mod image_policy;
mod jetstream_cluster;
mod kstatus;
mod kubelet_refusal;
mod leader_election;
mod leader_partition;
mod mqtt_auth;
mod mqtt_broker;
mod node_failure;
mod operator_install;
mod placement;
mod power_loss;
mod pubsub_server;
mod recovery;
mod registry_install;
mod results_at_limits;
mod run_isolation;
mod run_status_writes;
mod runner_control;
mod scenarios;
mod server_fence;
mod server_volumes;
mod stream_sweep;
mod target_auth;
mod target_tls;
mod tuning;
mod validation;
mod variants;
