# The node image's root filesystem: Debian bookworm by debootstrap, laid out as kind's base image
# Dockerfile (images/base in the kind module) lays out its own. Sourced by e2e/kind/node-image.

# What kind's base image installs, plus the runtime it builds from source (containerd, runc,
# CNI plugins: Debian's here), ipset for kube-router and socat for port-forward.
NODE_PACKAGES=systemd,systemd-sysv,dbus-bin,conntrack,iptables,nftables,ipset,iproute2,ethtool,\
util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,\
procps,containerd,runc,containernetworking-plugins,socat

# The Debian mirror apt already uses here (the only one a machine may reach), else Debian's own
# (a non-Debian host, e.g. an Ubuntu CI runner).
debian_mirror() {
  local m=""
  if grep -qx 'ID=debian' /etc/os-release 2>/dev/null; then
    m="$({ sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null
      sed -n 's/^deb \(\[[^]]*\] \)\?\([^ ]*\) bookworm .*/\2/p' /etc/apt/sources.list 2>/dev/null
    } | grep -v security | head -1)"
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

# build_rootfs DIR: debootstrap once per package list (cached: ≈ 2.5 min).
build_rootfs() {
  local dir="$1" want
  want="bookworm $NODE_PACKAGES"
  [ -d "$dir" ] && [ "$(cat "$dir.stamp" 2>/dev/null)" = "$want" ] && return 0
  log "debootstrap bookworm into $dir (≈ 3 min)"
  rm -rf "$dir.tmp" "$dir"
  # Two stages so that no package's maintainer script can start a service on this machine:
  # policy-rc.d refuses every start between unpacking and configuring.
  nice debootstrap --foreign --variant=minbase --include="$NODE_PACKAGES" \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg bookworm "$dir.tmp" \
    "$(debian_mirror)" >&2
  printf '#!/bin/sh\nexit 101\n' > "$dir.tmp/usr/sbin/policy-rc.d"
  chmod 755 "$dir.tmp/usr/sbin/policy-rc.d"
  nice chroot "$dir.tmp" /debootstrap/debootstrap --second-stage >&2
  rm -rf "$dir.tmp/debootstrap" "$dir.tmp"/var/lib/apt/lists/* "$dir.tmp"/var/cache/apt/*.bin
  mv "$dir.tmp" "$dir"
  echo "$want" > "$dir.stamp"
}

# apply_kind_base BASE ROOT: what images/base/Dockerfile does, from the module's files/.
apply_kind_base() {
  local base="$1" root="$2" f="$1/files"
  install -d -m 755 "$root/kind" "$root/kind/bin" "$root/LICENSES" "$root/etc/kubernetes/manifests"
  install -m 755 "$f"/usr/local/bin/* "$root/usr/local/bin/"
  install -m 644 "$f"/kind/*.txt "$root/kind/"
  install -m 755 "$f"/kind/bin/* "$root/kind/bin/"
  install -m 644 "$f"/LICENSES/* "$root/LICENSES/"
  install -m 644 "$f/etc/crictl.yaml" "$root/etc/"
  install -D -m 644 -t "$root/etc/containerd" "$f"/etc/containerd/*
  # This machine's capability bounding set lacks CAP_SYS_RESOURCE, so no process may lower an
  # oom_score_adj: runc would fail every pod sandbox ("can't get final child's PID from pipe").
  # kind turns this on for rootless nodes for the same reason; the local cluster does too.
  sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$root/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$root/etc/containerd/config.toml"
  install -D -m 644 -t "$root/etc/default" "$f"/etc/default/*
  install -D -m 644 -t "$root/etc/sysctl.d" "$f"/etc/sysctl.d/*
  find "$f/etc/systemd/system" -maxdepth 1 -type f -exec install -m 644 -t "$root/etc/systemd/system" {} +
  install -D -m 644 -t "$root/etc/systemd/system/kubelet.service.d" \
    "$f"/etc/systemd/system/kubelet.service.d/*
  find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$root"/lib/systemd/system/{multi-user,local-fs,basic}.target.wants/* \
    "$root"/etc/systemd/system/*.wants/* \
    "$root"/lib/systemd/system/sockets.target.wants/*{udev,initctl}*
  echo "ReadKMsg=no" >> "$root/etc/systemd/journald.conf"
  ln -sfn /usr/lib/systemd/systemd "$root/sbin/init"
  chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$root" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  # kind's units and entrypoint expect its own builds under /usr/local; Debian's are in /usr.
  local b
  for b in containerd ctr containerd-shim-runc-v2; do ln -sfn "/usr/bin/$b" "$root/usr/local/bin/$b"; done
  install -d -m 755 "$root/opt/cni/bin"
  cp -a "$root"/usr/lib/cni/. "$root/opt/cni/bin/"
  # The OCI spec every container starts from (no daemon needed to print it).
  chroot "$root" ctr oci spec |
    jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' > "$root/etc/containerd/cri-base.json"
  rm -rf "$root"/dev/* "$root/usr/sbin/policy-rc.d"
}

# add_rootfs_binary FROM ROOT PATH: copy PATH and the libraries it links, as resolved inside
# the rootfs FROM (whose packages the host may not have, e.g. ipset).
add_rootfs_binary() {
  local from="$1" root="$2" path="$3" lib real
  real="$(chroot "$from" readlink -f "$path")"
  install -D -m 755 "$from$real" "$root$real"
  [ "$real" = "$path" ] || { mkdir -p "$root$(dirname "$path")"; ln -sfn "$real" "$root$path"; }
  for lib in $(chroot "$from" ldd "$real" 2>/dev/null | grep -o '/[^ ]*' || true); do
    [ -e "$from$lib" ] || continue
    install -D -m 755 "$from$(chroot "$from" readlink -f "$lib")" "$root$lib"  # the loader must be executable
  done
}
