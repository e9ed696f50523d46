#!/usr/bin/env bash
# Builds what the local Kubernetes cluster runs (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy, kubectl, etcd, containerd, runc, the CNI plugins) and the pulumi-kubernetes provider plugin from
# Go modules, and installs the plugin into the pulumi CLI; a kubernetes plugin v4.25.0 that is
# installed already is kept, and none is built (localhosts/kubebuild.py). Cached by content under $SPEAR_CACHE/kubernetes: a second run takes a
# second. Cold: about 20-30 minutes on 2 cores and several GB of Go build cache.
# Then SeaweedFS's weed (the shared-state tests' S3 server; 7 minutes cold, measured), under
# $SPEAR_CACHE/seaweedfs. Prints each artifact's folder on stdout, progress on stderr. Arguments:
# artifact names (etcd, node, kubernetes, provider, seaweedfs); none means all.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/env.sh
source "$repo/scripts/env.sh" # the pulumi CLI the plugin is installed into
cd "$repo"
exec "$repo/.venv/bin/python" -m localhosts.kubebuild "$@"
