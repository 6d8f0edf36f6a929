//! Looking at, and disturbing, what runs, from outside the operator: HTTP through the API
//! server's proxies, toolbox pods and ephemeral containers, /proc as the toolbox prints it, an
//! independent NATS client, a pod cut off from the API server, a CPU hog the scheduler cannot
//! see, and what a fault did. May touch: pods of a test's namespace and, on the local cluster
//! only, this host (processes' /proc, pods' network namespaces through iptables and nft, the
//! kubelet's static pod directory, the natsprobe binary).
pub mod cpu_hog;
pub mod fault_watch;
pub mod natsprobe;
pub mod partition;
pub mod probe;
pub mod procfs;
pub mod toolbox;
