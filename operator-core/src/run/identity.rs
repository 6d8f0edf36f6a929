//! Who a run's children belong to, and the labels that say so. Below the builders and the
//! runner-access objects, which both name it.
use crate::meta::{
    Owner, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, LABEL_PART_OF, MANAGED_BY,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use msgbench_crds::BenchmarkRun;
use std::collections::BTreeMap;
use std::ops::Deref;

pub const KIND_LABEL: &str = "benchmarkrun";
/// Spec generation a child belongs to (a changed spec gets fresh children).
pub const LABEL_GENERATION: &str = "msgbench.dev/generation";
/// Who the children belong to: the run, owned like a server's children (`Owner`: name,
/// namespace, owner reference), and the spec generation they were made for. Reads as its
/// `Owner` (`id.name`, `id.owner_ref`); its labels are a runner's, not a server's.
#[derive(Clone, Debug)]
pub struct RunIdentity {
    pub owner: Owner,
    pub generation: i64,
}

impl Deref for RunIdentity {
    type Target = Owner;
    fn deref(&self) -> &Owner {
        &self.owner
    }
}

impl RunIdentity {
    /// `None` when the run has no namespace/uid (never the case for stored objects).
    pub fn of(br: &BenchmarkRun) -> Option<Self> {
        Some(Self {
            owner: Owner::of(br, KIND_LABEL)?,
            generation: br.meta().generation.unwrap_or(0),
        })
    }

    /// Job (and ConfigMap) name: one per generation; short enough for the job-name pod label.
    pub fn job_name(&self) -> String {
        let suffix = format!("-g{}", self.generation);
        let keep = 63 - suffix.len();
        let base: String = self.name.chars().take(keep).collect();
        format!("{}{suffix}", base.trim_end_matches(['-', '.']))
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_NAME.into(), KIND_LABEL.into()),
            (LABEL_INSTANCE.into(), self.name.clone()),
            (LABEL_COMPONENT.into(), "runner".into()),
            (LABEL_MANAGED_BY.into(), MANAGED_BY.into()),
            (LABEL_PART_OF.into(), "msgbench".into()),
            (LABEL_GENERATION.into(), self.generation.to_string()),
        ])
    }

    /// Selects this generation's runner pods.
    pub fn pod_selector(&self) -> String {
        format!(
            "{LABEL_NAME}={KIND_LABEL},{LABEL_INSTANCE}={},{LABEL_GENERATION}={}",
            self.name, self.generation
        )
    }

    pub(super) fn meta(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.job_name()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels()),
            owner_references: Some(vec![self.owner_ref.clone()]),
            ..ObjectMeta::default()
        }
    }
}
