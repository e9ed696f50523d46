"""The local cluster's NetworkPolicy enforcer: kube-network-policies (sigs.k8s.io; its version is
the one localhosts/kube/node/go.mod requires), built in the node's one go build
(localhosts/kube/kubebuild.py), in an image of its one static binary, and run as upstream's
install.yaml runs it, but with one capability rather than privileged: a DaemonSet in kube-system
on the node's network, with a ServiceAccount that may list and watch pods, namespaces and
NetworkPolicies, and containerd's NRI socket, which names the pod behind an address before the
API server knows it.

What it polices: the first packet of each connection from or to a pod that a NetworkPolicy
selects (the node's nftables queue it, from the POSTROUTING hook) is judged in userspace against
the policies; the rest of a connection follows its first packet. That hook sees what a pod sends
to another pod or off the node. What a pod sends to an address of its own node goes to the
node's INPUT hook and is never judged, as NetworkPolicy itself provides ("traffic to and from the
node where a Pod is running is always allowed"); docs/OPERATING.md says what that leaves open
here. A pod is queued once the API server shows its address, a moment after its network is up.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

from localhosts.images import image_files

from localhosts.kube import kubebuild, kubenode
from localhosts.images.image_files import Entries, Image

NAME = "kube-network-policies"
NAMESPACE = "kube-system"
REPOSITORY = f"localhost/spear-fleet/{NAME}"
BINARY = f"/bin/{NAME}"
RECIPE_VERSION = 1  # bump when the recipe changes, so cached layers are rebuilt
# On the node's network beside the kubelet's and kube-proxy's (localhosts/kube/kubenode.py).
METRICS_PORT = 10346
NFQUEUE = 98  # upstream's install.yaml's


def version() -> str:
    """The version localhosts/kube/node/go.mod requires, which the node's build compiles."""
    go_mod = (kubebuild.KUBE_MODULES / "node" / "go.mod").read_text()
    match = re.search(rf"^\s*{re.escape(kubebuild.NETPOL_MODULE)} (v\S+)$", go_mod, re.M)
    if match is None:
        raise RuntimeError(f"localhosts/kube/node/go.mod requires no {kubebuild.NETPOL_MODULE}")
    return match[1]


def ensure_image() -> Image:
    binary = str(kubebuild.node().ensure() / kubebuild.NETPOL_BINARY)
    entries: Entries = {}
    image_files.add_host_file(binary, entries, at=BINARY)  # static: no libraries
    image_files.finish(entries)
    tag = version()
    key = image_files.content_key(entries, RECIPE_VERSION)
    return image_files.cached_image(
        f"{NAME}-{key}", (f"{REPOSITORY}:{tag}",), tag, lambda: entries,
        {"Env": [image_files.PATH_ENV], "Entrypoint": [BINARY]},
        history=f"localhosts/kube/network_policies.py r{RECIPE_VERSION}")


def manifests(api_server_port: int) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) for each object the enforcer needs, in creation order."""
    labels = {"app": NAME}
    return [
        ("/api/v1/namespaces/kube-system/serviceaccounts",
         {"metadata": {"name": NAME, "namespace": NAMESPACE}}),
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles",
         {"metadata": {"name": NAME}, "rules": [
             {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["list", "watch"]},
             {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
              "verbs": ["list", "watch"]}]}),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
         {"metadata": {"name": NAME},
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
          "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]}),
        ("/apis/apps/v1/namespaces/kube-system/daemonsets",
         {"metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
          "spec": {"selector": {"matchLabels": labels}, "template": {
              "metadata": {"labels": labels},
              "spec": {
                  "hostNetwork": True, "dnsPolicy": "Default", "serviceAccountName": NAME,
                  "tolerations": [{"operator": "Exists"}],
                  "containers": [{
                      "name": NAME, "image": f"{REPOSITORY}:{version()}",
                      "imagePullPolicy": "Never",
                      "args": [f"--hostname-override={kubenode.NODE}", f"--nfqueue-id={NFQUEUE}",
                               f"--metrics-bind-address=127.0.0.1:{METRICS_PORT}", "--v=2"],
                      # The local API server listens on loopback only, so the `kubernetes`
                      # Service the in-cluster config would use has no endpoint; the enforcer is
                      # on the node's network, where loopback is the API server's.
                      "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                              {"name": "KUBERNETES_SERVICE_PORT", "value": str(api_server_port)}],
                      # Not privileged (the local API server allows no privileged pod): it
                      # writes the node's nftables and answers an nfqueue. Upstream also mounts
                      # the pods' network namespaces, for a containerd older than 2.1 whose NRI
                      # does not give a pod's addresses; this one's does.
                      "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                      "resources": {"requests": {"cpu": "50m", "memory": "50Mi"}},
                      "volumeMounts": [{"name": "nri", "mountPath": "/var/run/nri"}]}],
                  "volumes": [{"name": "nri", "hostPath": {"path": str(kubenode.NRI_DIR),
                                                           "type": "Directory"}}]}}}}),
    ]


def install(client, api_server_port: int) -> None:
    for path, obj in manifests(api_server_port):
        client.create(path, obj)


def enforcing() -> bool:
    """Whether the enforcer's table is in the node's nftables: it is written once the enforcer has
    its first view of the cluster's pods and policies, and removed when it stops."""
    return subprocess.run(["nft", "list", "table", *kubenode.NETPOL_TABLE], capture_output=True).returncode == 0


if __name__ == "__main__":
    image = ensure_image()
    print(json.dumps({"archive": str(image.archive), "refs": image.refs, "digest": image.digest},
                     indent=2))
