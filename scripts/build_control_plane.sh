#!/usr/bin/env bash
# Build (or reuse) the control plane the cluster tests run: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kwok and the LeaderWorkerSet controller, from Go
# modules at the versions in tests/cluster/versions.py, into
# ${INFRA_TOOLS_CACHE:-~/.cache/inference-platform-tools}/<tool>-<version>/bin (tests/cluster/build.py).
#   scripts/build_control_plane.sh                      # everything
#   scripts/build_control_plane.sh kubernetes:kube-apiserver etcd   # a subset
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m tests.cluster.build "$@"
