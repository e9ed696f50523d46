"""The local Kubernetes cluster (localhosts/kube/kubecluster.py) is a real one: its API server answers
as the version built, its one node (kubelet, containerd, kube-proxy) is Ready with the GPU
capacity it was given, the real pulumi-kubernetes provider rolls a Deployment out on it whose
pods run real processes answering at a Service's cluster IP from this machine, and stopping the
node puts back everything it changed on the machine."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from localhosts.kube import kubenode
from localhosts.kube.kubebuild import KUBERNETES_VERSION
from localhosts.kube.kubecluster import GPU_RESOURCE, LOCAL_CLUSTER, node_ready, stop_cluster
from localhosts.images.serving_image.build import ensure_image
from localhosts.engine import Project, engine_env
from tests.support.kube import sole_use

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes]

SERVICE_IP = "10.96.100.90"
DEPLOYMENT_PROGRAM = '''
import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
cluster = k8s.Provider("cluster", kubeconfig=config.require("kubeconfig"))
opts = pulumi.ResourceOptions(provider=cluster)
namespace = k8s.core.v1.Namespace("smoke", metadata={"name": "smoke"}, opts=opts)
labels = {"app": "gpu-smoke"}
deployment = k8s.apps.v1.Deployment("gpu-smoke", opts=opts, metadata={"name": "gpu-smoke", "namespace": namespace.metadata.name},
    spec={"replicas": 2, "selector": {"match_labels": labels}, "template": {
        "metadata": {"labels": labels},
        "spec": {"containers": [{
            "name": "server", "image": config.require("image"),
            # The serving image's Python: each pod answers with its own name.
            "command": ["python3", "-c", "import http.server, socket\\n"
                        "class H(http.server.BaseHTTPRequestHandler):\\n"
                        "    def do_GET(self):\\n"
                        "        self.send_response(200); self.end_headers(); self.wfile.write(socket.gethostname().encode())\\n"
                        "http.server.ThreadingHTTPServer(('', 8080), H).serve_forever()"],
            "ports": [{"containerPort": 8080}],
            "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}})
service = k8s.core.v1.Service("gpu-smoke", opts=opts, metadata={"name": "gpu-smoke", "namespace": namespace.metadata.name},
    spec={"selector": labels, "cluster_ip": config.require("serviceIp"), "ports": [{"port": 80, "target_port": 8080}]})
pulumi.export("readyReplicas", deployment.status.ready_replicas)
'''


def test_the_api_server_answers_as_the_kubernetes_version_built(kube_cluster):
    status, version = kube_cluster.client().request("GET", "/version")
    assert status == 200
    assert version["gitVersion"] == KUBERNETES_VERSION


def test_the_node_is_ready_on_containerd_with_the_gpus_it_was_given(kube_cluster):
    node = kube_cluster.client().get(f"/api/v1/nodes/{kube_cluster.node}")
    assert node_ready(node), node["status"].get("conditions")
    assert node["status"]["allocatable"][GPU_RESOURCE] == str(kube_cluster.gpus)
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.4.2"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == KUBERNETES_VERSION
    assert {"type": "InternalIP", "address": kubenode.NODE_IP} in node["status"]["addresses"]


def answers(url: str, want: int, timeout: float = 60.0) -> set[str]:
    """The distinct answers of `url` until `want` of them were seen (or the time is up)."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                seen.add(response.read().decode())
        except OSError:
            time.sleep(0.5)
    return seen


def test_a_deployment_made_by_pulumi_up_runs_real_pods_behind_its_service_and_destroy_removes_it(
        kube_cluster, tmp_path):
    project = Project(tmp_path, engine_env(), program=DEPLOYMENT_PROGRAM)
    project.new_stack("kube", {"kubeconfig": str(kube_cluster.kubeconfig), "image": ensure_image().refs[0],
                               "serviceIp": SERVICE_IP})
    client = kube_cluster.client()

    up = project.up("kube")
    assert up.ok, up.output[-4000:]
    assert project.outputs("kube") == {"readyReplicas": 2}
    pods = client.get("/api/v1/namespaces/smoke/pods?labelSelector=app%3Dgpu-smoke")["items"]
    assert sorted(p["status"]["phase"] for p in pods) == ["Running", "Running"]
    assert {p["spec"]["nodeName"] for p in pods} == {kube_cluster.node}
    # Through kube-proxy from this machine (as the gateway host reaches the fleet): both pods answer.
    assert answers(f"http://{SERVICE_IP}/", 2) == {p["metadata"]["name"] for p in pods}

    destroy = project.destroy("kube")
    assert destroy.ok, destroy.output[-4000:]
    assert client.get("/apis/apps/v1/namespaces/smoke/deployments/gpu-smoke") is None
    deadline = time.monotonic() + 60
    while client.get("/api/v1/namespaces/smoke") is not None and time.monotonic() < deadline:
        time.sleep(1)
    assert client.get("/api/v1/namespaces/smoke") is None


@pytest.mark.sole_cluster
def test_stopping_the_cluster_restores_every_machine_setting_the_node_changed(kube_cluster):
    # Another pytest's tests on this machine must not lose the cluster under them: alone, and it
    # runs again afterwards (sole_use).
    with sole_use() as cluster:
        before = json.loads(kubenode.snapshot_file(cluster.state_dir).read_text())
        # The node changed the machine while it runs (measured: the kubelet sets these).
        assert kubenode.leftovers(cluster.state_dir, before), "a running node changes nothing?"
        stop_cluster(LOCAL_CLUSTER)
        assert kubenode.leftovers(cluster.state_dir, before) == []
        assert not kubenode.snapshot_file(cluster.state_dir).exists()
