//! The server kinds' core: what each kind (`jetstream`, `mqtt`, `pubsub`) builds from its spec,
//! the rules admission cannot check (`validate`), and the status a pass computes (`status`, with `kstatus`'s Reconciling/Stalled).
//! May: compute from its arguments. May not: read a clock, the network or the API server; the
//! operator's `server::reconcile` observes the pods, applies the children and writes the
//! status.
pub mod builder;
pub mod children;
pub mod decide;
pub mod fence;
pub mod hold;
pub mod jetstream;
pub mod kind;
pub mod kstatus;
pub mod mqtt;
pub mod pubsub;
pub mod status;
pub mod validate;
