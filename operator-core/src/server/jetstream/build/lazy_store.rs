//! `spec.faultInjection.powerLoss`: the store under msgbench-lazyfs (carried in msgbench's
//! nats-server image), so a `powerLoss` fault can discard what nats-server wrote but never
//! fsynced. The wrapper mounts a FUSE file system at the store path over the real volume (moved
//! to [`BACKING_DIR`]), starts nats-server on it as [`NATS_UID`], and answers the fault agent on
//! a socket in the emptyDir they share.
//!
//! Privileged, as uid 0: mount(2) needs CAP_SYS_ADMIN, and containerd gives a container
//! `/dev/fuse` only when it is privileged (runc's default device rules leave fuse out), with no
//! AppArmor profile in the way (containerd's default one denies mount). nats-server itself runs
//! as its usual user without capabilities (the wrapper drops to it before exec). Only where the
//! chart's `faults.powerLoss` allows it (`FaultPolicy`).
use super::pod::NATS_UID;
use crate::run::faults::agent_pod::LAZYFS_CONTROL_VOLUME;
use crate::server_pod::{empty_dir, mount};
use k8s_openapi::api::core::v1::{Container, SecurityContext, Volume, VolumeMount};
use runner_api::fault_agent::{LAZYFS_CONTROL_DIR, LAZYFS_CONTROL_SOCKET};

/// The wrapper in msgbench's nats-server image.
pub const LAZYFS_BINARY: &str = "/usr/local/bin/msgbench-lazyfs";
/// Where the store's volume is mounted instead of the store path: the "disk".
pub const BACKING_DIR: &str = "/data-backing";
/// The store path nats-server sees (nats.conf's `store_dir`): the lazy file system.
const STORE_DIR: &str = "/data";
/// An empty directory to mount on: the root file system stays read-only.
const MOUNTPOINT_VOLUME: &str = "lazyfs-mountpoint";

/// Runs `c` (nats-server) under the wrapper: the store volume moves to [`BACKING_DIR`], the
/// wrapper's mountpoint and control directory are added.
pub fn wrap(c: &mut Container, volumes: &mut Vec<Volume>, mounts: &mut [VolumeMount]) {
    for m in mounts.iter_mut().filter(|m| m.mount_path == STORE_DIR) {
        m.mount_path = BACKING_DIR.into();
    }
    volumes.push(empty_dir(MOUNTPOINT_VOLUME, false));
    volumes.push(empty_dir(LAZYFS_CONTROL_VOLUME, false));
    let extra = [
        mount(MOUNTPOINT_VOLUME, STORE_DIR, false),
        mount(LAZYFS_CONTROL_VOLUME, LAZYFS_CONTROL_DIR, false),
    ];
    c.volume_mounts.get_or_insert_with(Vec::new).extend(extra);
    let uid = NATS_UID.to_string();
    let mut args: Vec<String> = [
        "--backing",
        BACKING_DIR,
        "--mount",
        STORE_DIR,
        "--control",
        LAZYFS_CONTROL_SOCKET,
        "--uid",
        &uid,
        "--gid",
        &uid,
        "--",
        "/nats-server",
    ]
    .map(String::from)
    .to_vec();
    args.extend(c.args.take().unwrap_or_default());
    c.command = Some(vec![LAZYFS_BINARY.into()]);
    c.args = Some(args);
    c.security_context = Some(SecurityContext {
        privileged: Some(true),
        run_as_user: Some(0),
        run_as_group: Some(0),
        run_as_non_root: Some(false),
        read_only_root_filesystem: Some(true),
        ..SecurityContext::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault_policy::FaultPolicy;
    use crate::meta::Owner;
    use crate::operands::OperandDefaults;
    use crate::server::kind::ManagedServerKind;
    use k8s_openapi::api::core::v1::PodSpec;
    use msgbench_crds::jetstream_cluster::JetStreamCluster;

    fn pod(fault_injection: &str, storage: &str, faults: FaultPolicy) -> PodSpec {
        let js: JetStreamCluster = serde_norway::from_str(&format!(
            "apiVersion: msgbench.dev/v1alpha1\nkind: JetStreamCluster\n\
             metadata: {{name: js, namespace: bench, uid: u1}}\n\
             spec: {{replicas: 3, jetstream: {{storage: {{type: {storage}}}}}, \
             faultInjection: {fault_injection}}}\n"
        ))
        .unwrap();
        let owner = Owner::of(&js, JetStreamCluster::KIND_LABEL).unwrap();
        let operands = OperandDefaults {
            faults,
            ..OperandDefaults::default()
        };
        let c = js.build(&owner, 3, &operands);
        c.template().unwrap().spec.clone().unwrap()
    }

    const ALLOWED: FaultPolicy = FaultPolicy {
        agents: true,
        network: false,
        power_loss: true,
    };

    fn mount_of<'a>(c: &'a Container, volume: &str) -> Option<&'a str> {
        let mounts = c.volume_mounts.iter().flatten();
        mounts
            .filter(|m| m.name == volume)
            .map(|m| m.mount_path.as_str())
            .next()
    }

    #[test]
    fn power_loss_runs_nats_under_the_wrapper_with_the_volume_as_backing() {
        let p = pod("{enabled: true, powerLoss: true}", "file", ALLOWED);
        let nats = &p.containers[0];
        assert_eq!(nats.command, Some(vec![LAZYFS_BINARY.to_string()]));
        let args = nats.args.clone().unwrap();
        let after = args.iter().position(|a| a == "--").unwrap();
        assert_eq!(
            args[after + 1..],
            ["/nats-server", "--config", "/etc/nats/nats.conf"]
        );
        let flag = |f: &str| &args[args.iter().position(|a| a == f).unwrap() + 1];
        assert_eq!(
            (flag("--backing").as_str(), flag("--mount").as_str()),
            (BACKING_DIR, STORE_DIR)
        );
        assert_eq!(flag("--uid"), &NATS_UID.to_string());
        assert_eq!(flag("--control"), LAZYFS_CONTROL_SOCKET);
        // The claim is the backing; the store path is the FUSE mount over an empty dir.
        assert_eq!(mount_of(nats, "data"), Some(BACKING_DIR));
        assert_eq!(mount_of(nats, MOUNTPOINT_VOLUME), Some(STORE_DIR));
        assert_eq!(
            mount_of(nats, LAZYFS_CONTROL_VOLUME),
            Some(LAZYFS_CONTROL_DIR)
        );
        let sc = nats.security_context.clone().unwrap();
        assert_eq!((sc.privileged, sc.run_as_user), (Some(true), Some(0)));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        // The agent reaches the control socket through the same emptyDir.
        let agent = &p.containers[1];
        assert_eq!(
            mount_of(agent, LAZYFS_CONTROL_VOLUME),
            Some(LAZYFS_CONTROL_DIR)
        );
    }

    #[test]
    fn without_the_install_s_consent_or_the_opt_in_the_pod_is_unchanged() {
        let plain = pod("{enabled: true}", "file", ALLOWED);
        let refused = pod(
            "{enabled: true, powerLoss: true}",
            "file",
            FaultPolicy {
                power_loss: false,
                ..ALLOWED
            },
        );
        for p in [&plain, &refused] {
            let nats = &p.containers[0];
            assert_eq!(nats.command, None);
            assert_eq!(mount_of(nats, "data"), Some(STORE_DIR));
            let sc = nats.security_context.clone().unwrap();
            assert_eq!((sc.privileged, sc.run_as_non_root), (None, Some(true)));
            assert!(p
                .volumes
                .iter()
                .flatten()
                .all(|v| v.name != MOUNTPOINT_VOLUME));
        }
    }
}
