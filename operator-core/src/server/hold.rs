//! A server held at 0 replicas after a kubelet refusal: `status` decides it, `kstatus` reads it
//! (its own module so neither imports the other's).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Why the workload is held at 0 replicas.
#[derive(Clone, Debug, PartialEq)]
pub struct Hold {
    pub reason: String,
    pub message: String,
    /// A transient refusal: when the workload is scaled up again to retry. `None`: held until
    /// the spec changes.
    pub retry_at: Option<Time>,
}

impl Hold {
    /// The refusal's own words, without what a previous pass added about the scaling.
    pub fn refusal(&self) -> &str {
        match self.message.find("; scaled to 0") {
            Some(i) => &self.message[..i],
            None => &self.message,
        }
    }
}
