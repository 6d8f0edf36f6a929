//! The server's memory budget and its size-limited volumes.
use super::*;
use crate::server_pod::empty_dir;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use msgbench_crds::common::ResourceAmounts;
use msgbench_crds::common::Resources;

fn limited(memory: &str) -> Resources {
    Resources {
        requests: None,
        limits: Some(ResourceAmounts {
            cpu: None,
            memory: Some(Quantity(memory.into())),
        }),
    }
}

#[test]
fn the_memory_budget_follows_the_limit_with_a_floor() {
    assert_eq!(memory_budget(&limited("128Mi")), Some(48 << 20));
    assert_eq!(memory_budget(&limited("1Gi")), Some(384 << 20));
    assert_eq!(memory_budget(&limited("32Mi")), Some(16 << 20));
    assert_eq!(memory_budget(&Resources::default()), None);
}

#[test]
fn the_file_database_volume_has_a_size_limit() {
    let mut pss = PubSubServer::new(
        "p",
        serde_json::from_value(serde_json::json!({"database": "file"})).unwrap(),
    );
    pss.metadata.namespace = Some("bench".into());
    pss.metadata.uid = Some("u1".into());
    let owner = Owner::of(&pss, "pubsubserver").unwrap();
    let children = build(&pss, &owner, 1, &OperandDefaults::default());
    let pod = children.deployments[0]
        .spec
        .as_ref()
        .unwrap()
        .template
        .clone();
    let volumes = pod.spec.unwrap().volumes.unwrap();
    let limit = |name: &str| {
        let v = volumes.iter().find(|v| v.name == name).unwrap();
        v.empty_dir.as_ref().unwrap().size_limit.clone()
    };
    assert_eq!(limit("data"), Some(Quantity(DATA_SIZE_LIMIT.into())));
    assert_eq!(limit("tmp"), Some(Quantity(TMP_SIZE_LIMIT.into())));
    assert_eq!(empty_dir("x", false).empty_dir.unwrap().size_limit, None);
}
