"""The vLLM fleet on a real Kubernetes API server (the session's local cluster: etcd, the control
plane and kwok's fake GPU nodes, tests/support/kube.py) through the real engine and the real
pulumi-kubernetes provider, one lifecycle in order: up makes everything and the stable Deployment
becomes Available on the fake GPU nodes; a second up changes nothing; an image and revision bump
is a rolling update the preview names; a canary joins the same Service; a promotion without a
passing gate record is refused before anything changes, with one it rolls the canary's pair out
as stable; scripts/rollback brings the previous pair back; destroy removes everything.
(Containers never run: kwok reports the pods Ready; vLLM itself is never started.)"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from spear import vllm
from spear.review import summarize
from tests.support.config_cases import CANARY_PAIR, NEXT_REVISION, STABLE_PAIR, passing_record
from tests.support.engine import REPO, Project, engine_env, without_inference_hosts
from tests.support.stack_files import local_inference_hosts

# On the local cluster, with the kubernetes plugin: built from Go modules, so these run last.
pytestmark = pytest.mark.kubernetes

STACK = "fleet"
API_KEY = "sk-fleet-integration-0123456789"
NAMESPACE = "vllm-it"
AGENTS = "agents-it"


def fleet_config(kubeconfig: Path, cache: Path) -> dict[str, Any]:
    return {
        "kubeconfig": str(kubeconfig),
        "namespace": NAMESPACE,
        "tolerateFakeNodes": True,  # kwok's nodes carry a NoSchedule taint
        "servedModelName": "qwen3-coder-next",
        "stable": STABLE_PAIR,
        "replicas": 2,
        "tensorParallelSize": 2,
        "maxModelLen": 262144,
        "schedulingPriority": True,
        "modelCache": {"size": "1Gi", "hostPath": str(cache), "accessMode": "ReadWriteOnce"},
        "agentSandbox": {"namespace": AGENTS, "gateway": {"cidr": "10.20.0.10/32", "ports": [4000]},
                         "mirrors": {"pypi": {"cidr": "10.20.1.0/24", "ports": [443]}}},
        "observability": {"hatchCapUsd": 500},
    }


@pytest.fixture(scope="module")
def fleet(kube_cluster, tmp_path_factory):
    """A project whose stack declares the fleet on the session's cluster (the inference host the
    config needs is left out by the program: this is about the fleet)."""
    workdir = tmp_path_factory.mktemp("fleet")
    project = without_inference_hosts(workdir, engine_env())
    key = workdir / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = local_inference_hosts()
    config["inferenceHosts"]["local"]["ssh"]["privateKeyPath"] = str(key)
    config["vllmFleet"] = fleet_config(kube_cluster.kubeconfig, workdir / "model-cache")
    project.new_stack(STACK, config)
    subprocess.run(["pulumi", "config", "set", "--secret", "--stack", STACK, "spear-fleet:vllmApiKey",
                    API_KEY, "--non-interactive"], cwd=project.dir, env=project.env, check=True,
                   capture_output=True)
    yield project, kube_cluster.client(), kube_cluster
    project.destroy(STACK)


def set_pair(project: Project, key: str, pair: dict[str, str] | None) -> None:
    """Declare (or, with None, drop) vllmFleet.<key>, each value as text."""
    subprocess.run(["pulumi", "config", "rm", "--path", "--stack", STACK, f"spear-fleet:vllmFleet.{key}",
                    "--non-interactive"], cwd=project.dir, env=project.env, capture_output=True)
    for name, value in (pair or {}).items():
        project.set_config(STACK, f"vllmFleet.{key}.{name}", value)


def deployment(client, track: str) -> dict | None:
    return client.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/vllm-{track}")


def serving(client, track: str) -> tuple[str, str]:
    """(image, --revision) of a track's Deployment, as the cluster has it."""
    [container] = deployment(client, track)["spec"]["template"]["spec"]["containers"]
    return container["image"], vllm.flags(container["command"])["--revision"]


def available(client, track: str, replicas: int) -> bool:
    status = deployment(client, track)["status"]
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
    return (conditions.get("Available") == "True" and status.get("availableReplicas") == replicas
            and status.get("updatedReplicas") == replicas and status.get("replicas") == replicas)


def pods(client, track: str) -> list[dict]:
    return client.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3Dvllm%2Ctrack%3D{track}")["items"]


def test_up_creates_the_fleet_and_the_deployment_becomes_available_on_fake_gpu_nodes(fleet):
    project, client, cluster = fleet
    up = project.up(STACK)
    assert up.ok, up.output[-6000:]
    assert available(client, "stable", 2)
    stable = deployment(client, "stable")
    [container] = stable["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "vllm/vllm-openai:v0.24.0"
    assert container["command"][:3] == ["vllm", "serve", "Qwen/Qwen3-Coder-Next-FP8"]
    assert vllm.priority_scheduling(container["command"])
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    running = pods(client, "stable")
    assert sorted(p["status"]["phase"] for p in running) == ["Running", "Running"]
    assert {p["spec"]["nodeName"] for p in running} <= set(cluster.nodes)
    # The key: in the Secret the pods read, a Pulumi secret in state, never in plain text there.
    secret = client.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/vllm-api-key")
    assert base64.b64decode(secret["data"]["VLLM_API_KEY"]).decode() == API_KEY
    assert API_KEY not in project.state_text(STACK)
    claim = client.get(f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/vllm-model-cache")
    assert claim["status"]["phase"] == "Bound"
    deny = client.get(f"/apis/networking.k8s.io/v1/namespaces/{AGENTS}/networkpolicies/default-deny-egress")
    assert deny["spec"]["policyTypes"] == ["Egress"] and not deny["spec"].get("egress")
    rules = client.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/vllm-alerts")["data"]
    assert "spear_hatch_spend_usd" in rules["spear-fleet-vllm.rules.yaml"]
    outputs = project.outputs(STACK)["vllm_fleet"]
    assert outputs["endpoint"] == f"http://vllm.{NAMESPACE}.svc.cluster.local:8000/v1"
    assert outputs["stable_ready_replicas"] == 2


def test_a_second_up_changes_nothing(fleet):
    project, _, _ = fleet
    again = project.up(STACK)
    assert again.ok, again.output[-4000:]
    assert set(again.changes()) == {"same"}


def test_an_image_and_revision_bump_is_a_rolling_update_the_preview_names(fleet):
    project, client, _ = fleet
    # Declared as a promotion would be, with the gate's passing record for the new pair.
    set_pair(project, "previous", STABLE_PAIR)
    set_pair(project, "stable", CANARY_PAIR)
    record_config(project, "canary-1", passing_record(CANARY_PAIR))
    text = summarize(project.preview(STACK), None)
    assert "**vLLM stable Deployment** (`vllm-stable`): **rolling update**" in text
    assert "stable: v0.24.0 -> v0.25.0, revision da6e2ed -> 1234567" in text
    up = project.up(STACK)
    assert up.ok, up.output[-6000:]
    assert up.ops()["vllm-stable"] == "update"
    assert serving(client, "stable") == ("vllm/vllm-openai:v0.25.0", NEXT_REVISION)
    assert available(client, "stable", 2)
    # Rolled, not recreated: a new ReplicaSet holds the pods, the old one is scaled to zero.
    sets = client.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets?labelSelector=track%3Dstable")["items"]
    assert sorted(rs["spec"]["replicas"] for rs in sets) == [0, 2]


def record_config(project: Project, name: str, record: dict[str, Any]) -> None:
    """vllmFleet.rolloutGate.<name> = record, with numbers as numbers."""
    path = project.dir / "stacks" / f"Pulumi.{STACK}.yaml"
    doc = yaml.safe_load(path.read_text())
    fleet = doc["config"]["spear-fleet:vllmFleet"]
    gates = fleet.get("rolloutGate")
    fleet["rolloutGate"] = {**(gates if isinstance(gates, dict) else {}), name: record}
    path.write_text(yaml.safe_dump(doc))


def test_a_canary_runs_beside_stable_behind_the_same_service(fleet):
    project, client, _ = fleet
    # A newer canary against the (now v0.25.0) stable pair.
    canary = {**CANARY_PAIR, "tag": "v0.26.0", "revision": "ab" * 20}
    set_pair(project, "canary", canary)
    project.set_config(STACK, "vllmFleet.canary.replicas", 1)
    text = summarize(project.preview(STACK), None)
    assert "canary: v0.25.0 -> v0.26.0, revision 1234567 -> ababab" in text
    up = project.up(STACK)
    assert up.ok, up.output[-6000:]
    assert up.ops()["vllm-canary"] == "create" and up.ops().get("vllm-stable", "same") == "same"
    assert available(client, "canary", 1)
    assert serving(client, "canary") == ("vllm/vllm-openai:v0.26.0", "ab" * 20)
    # One Service over both tracks: its endpoints are the two stable pods and the canary.
    assert ready_endpoints(client) == 3


def ready_endpoints(client, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    count = 0
    while time.monotonic() < deadline:
        slices = client.get(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"
                            "?labelSelector=kubernetes.io%2Fservice-name%3Dvllm")["items"]
        count = sum(1 for s in slices for e in s.get("endpoints") or ()
                    if (e.get("conditions") or {}).get("ready"))
        if count == 3:
            break
        time.sleep(1)
    return count


def test_a_promotion_without_a_passing_record_is_refused_before_anything_changes(fleet):
    project, client, _ = fleet
    canary = {**CANARY_PAIR, "tag": "v0.26.0", "revision": "ab" * 20}
    set_pair(project, "previous", CANARY_PAIR)
    set_pair(project, "stable", canary)
    refused = project.up(STACK)
    assert not refused.ok
    assert ("spear-fleet:vllmFleet.stable: got a promotion to v0.26.0 @ Qwen/Qwen3-Coder-Next-FP8"
            " revision ababab") in refused.output
    assert "no gate record pins exactly v0.26.0" in refused.output
    assert serving(client, "stable") == ("vllm/vllm-openai:v0.25.0", NEXT_REVISION)
    assert deployment(client, "canary") is not None


def test_a_promotion_with_a_passing_record_rolls_the_canarys_pair_out_as_stable(fleet):
    project, client, _ = fleet
    canary = {**CANARY_PAIR, "tag": "v0.26.0", "revision": "ab" * 20}
    record_config(project, "canary-2", passing_record(canary))
    set_pair(project, "canary", None)
    up = project.up(STACK)
    assert up.ok, up.output[-6000:]
    assert up.ops()["vllm-stable"] == "update" and up.ops()["vllm-canary"] == "delete"
    assert serving(client, "stable") == ("vllm/vllm-openai:v0.26.0", "ab" * 20)
    assert available(client, "stable", 2)
    assert deployment(client, "canary") is None


def test_scripts_rollback_brings_the_previous_pair_back_with_pulumi_up(fleet):
    project, client, _ = fleet
    env = {**project.env, "SPEAR_PROJECT_DIR": str(project.dir)}
    done = subprocess.run([str(REPO / "scripts" / "rollback"), "--stack", STACK, "--yes"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert serving(client, "stable") == ("vllm/vllm-openai:v0.25.0", NEXT_REVISION)
    assert available(client, "stable", 2)
    config = json.loads(project.pulumi("config", "get", "--path", "--stack", STACK,
                                       "spear-fleet:vllmFleet.stable", "--json").stdout)
    stable = json.loads(config["value"]) if "value" in config else config
    assert stable == CANARY_PAIR  # the previous pair, now stable


def test_destroy_removes_everything(fleet):
    project, client, _ = fleet
    gone = project.destroy(STACK)
    assert gone.ok, gone.output[-4000:]
    assert set(gone.changes()) == {"delete"}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (client.get(f"/api/v1/namespaces/{NAMESPACE}")
                                           or client.get(f"/api/v1/namespaces/{AGENTS}")):
        time.sleep(1)
    assert client.get(f"/api/v1/namespaces/{NAMESPACE}") is None
    assert client.get(f"/api/v1/namespaces/{AGENTS}") is None
