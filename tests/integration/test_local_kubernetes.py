"""The local Kubernetes cluster (localhosts/kubecluster.py) is a real one: its API server answers
as the version built, its fake GPU node is Ready, and the real pulumi-kubernetes provider rolls a
Deployment out on it (kwok reports the pods Ready; no container runs) and destroys it."""

from __future__ import annotations

import pytest

from localhosts.kubebuild import KUBERNETES_VERSION
from localhosts.kubecluster import GPU_RESOURCE, node_ready
from tests.support.engine import Project, engine_env

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes]

DEPLOYMENT_PROGRAM = '''
import pulumi
import pulumi_kubernetes as k8s

cluster = k8s.Provider("cluster", kubeconfig=pulumi.Config().require("kubeconfig"))
opts = pulumi.ResourceOptions(provider=cluster)
namespace = k8s.core.v1.Namespace("smoke", metadata={"name": "smoke"}, opts=opts)
labels = {"app": "gpu-smoke"}
deployment = k8s.apps.v1.Deployment("gpu-smoke", opts=opts, metadata={"name": "gpu-smoke", "namespace": namespace.metadata.name},
    spec={"replicas": 2, "selector": {"match_labels": labels}, "template": {
        "metadata": {"labels": labels},
        "spec": {
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "server", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}})
pulumi.export("readyReplicas", deployment.status.ready_replicas)
'''


def test_the_api_server_answers_as_the_kubernetes_version_built(kube_cluster):
    status, version = kube_cluster.client().request("GET", "/version")
    assert status == 200
    assert version["gitVersion"] == KUBERNETES_VERSION


def test_every_fake_gpu_node_is_ready_with_eight_gpus(kube_cluster):
    client = kube_cluster.client()
    for name in kube_cluster.nodes:
        node = client.get(f"/api/v1/nodes/{name}")
        assert node_ready(node), node["status"].get("conditions")
        assert node["status"]["allocatable"][GPU_RESOURCE] == "8"


def test_a_deployment_made_by_pulumi_up_becomes_available_and_destroy_removes_it(kube_cluster, tmp_path):
    project = Project(tmp_path, engine_env(), program=DEPLOYMENT_PROGRAM)
    project.new_stack("kube", {"kubeconfig": str(kube_cluster.kubeconfig)})
    client = kube_cluster.client()

    up = project.up("kube")
    assert up.ok, up.output[-4000:]
    assert project.outputs("kube") == {"readyReplicas": 2}
    deployment = client.get("/apis/apps/v1/namespaces/smoke/deployments/gpu-smoke")
    conditions = {c["type"]: c["status"] for c in deployment["status"]["conditions"]}
    assert conditions["Available"] == "True"
    pods = client.get("/api/v1/namespaces/smoke/pods?labelSelector=app%3Dgpu-smoke")["items"]
    assert sorted(p["status"]["phase"] for p in pods) == ["Running", "Running"]
    assert {p["spec"]["nodeName"] for p in pods} <= set(kube_cluster.nodes)

    destroy = project.destroy("kube")
    assert destroy.ok, destroy.output[-4000:]
    assert client.get("/apis/apps/v1/namespaces/smoke/deployments/gpu-smoke") is None
    assert client.get("/api/v1/namespaces/smoke") is None
