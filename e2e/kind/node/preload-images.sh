#!/bin/bash
# Import the images this node image carries into the kubelet's containerd namespace (nothing can
# be pulled: no registry is reachable), pinned so the kubelet's image GC never removes them.
set -euo pipefail
for f in /kind/images/*.tar; do
  ctr --namespace k8s.io images import --all-platforms --snapshotter overlayfs "$f"
done
ctr --namespace k8s.io images ls -q | while read -r ref; do
  ctr --namespace k8s.io images label "$ref" io.cri-containerd.pinned=pinned >/dev/null
done
