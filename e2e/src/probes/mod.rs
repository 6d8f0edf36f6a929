//! Looking at, and disturbing, what runs, from outside the operator: HTTP through the API
//! server's proxies, toolbox pods and ephemeral containers, /proc as the toolbox prints it, an
//! independent NATS client, a pod cut off from the API server, a CPU hog the scheduler cannot
//! see, and what a fault did. May touch: pods of a test's namespace; pod processes' /proc and
//! their network namespaces through this host's iptables and nft (the host sees them on both
//! flavours); the kubelet's static pod directory (local: on this host; kind: in the node
//! container); the natsprobe binary (kind: run in the engine's network namespace); the kstatusprobe binary
//! (kstatus on an object read here).
pub mod cpu_hog;
pub mod fault_watch;
pub mod kstatus;
pub mod natsprobe;
pub mod partition;
pub mod probe;
pub mod procfs;
pub mod static_pods;
pub mod toolbox;
