#!/usr/bin/env bash
# Builds the pulumi-kubernetes provider plugin and installs it into the pulumi CLI (a kubernetes
# plugin v4.25.0 that is installed already is kept, and none is built), then what the local
# Kubernetes cluster runs (etcd, containerd, runc, the CNI plugins, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl), from Go modules
# (localhosts/kube/kubebuild.py). Cached by content under $SPEAR_CACHE/kubernetes: a second run takes
# a second. Cold: about 20-30 minutes on 2 cores and several GB of Go build cache. Prints each
# artifact's folder on stdout, progress on stderr. Arguments: artifact names (provider, etcd,
# node, kubernetes); none means all.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/env.sh
source "$repo/scripts/env.sh" # the pulumi CLI the plugin is installed into
cd "$repo"
exec "$repo/.venv/bin/python" -m localhosts.kube.kubebuild "$@"
