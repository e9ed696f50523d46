"""The RunPod endpoint on real parts: the real engine deploys the project's pod through the RunPod
API stand-in (which follows RunPod's published contract), whose pods are local systemd hosts whose
sshd moves to a new port on every restart, as RunPod's do; vLLM there is the vllm stand-in, which
checks its exact flags and serves the tiny model through llama-server.

The tests form one scenario on one stack and run in file order: each starts from the state the
previous one left.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from components.cache import cache_dir
from spear.probes import COMPLETION, MODEL_LIST, TOOL_CALL
from spear.smoke import EXPECTED_TEXT, judge, request_body
from components.hostops.ssh import Session
from localhosts.hosts.host import host_status
from review.parts import overall, parts
from localhosts.engine import Project, engine_env, without_inference_hosts
from tests.support.runpod_api_standin import NspawnPods, RunPodApiStandIn
from tests.support.stack_files import local_inference_hosts

STACK = "pod"
POD = "gpu"
RUNPOD_KEY = "rpa_INTEGRATION_TEST_KEY"
VLLM_KEY = "sk-vllm-integration-test-key"
# Ports no other integration test uses: the pods share this machine's network.
SSH_PORTS = range(2260, 2280)
VLLM_PORT = 8140
REVISION = "da6e2ed27304dd39abadd9c82ef50e8de67bdd4c"
NEW_REVISION = "0123456789abcdef0123456789abcdef01234567"
SERVED = "qwen3-coder-next"
SMOKE = f"end_turn | {EXPECTED_TEXT} | ()"

def key_file(path: Path) -> Path:
    key = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption())
    path.write_bytes(key)
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def standin():
    with RunPodApiStandIn(RUNPOD_KEY, NspawnPods(SSH_PORTS)) as api:
        yield api


@pytest.fixture(scope="module")
def pod_key(tmp_path_factory) -> Path:
    return key_file(tmp_path_factory.mktemp("keys") / "id_ed25519_pod")


@pytest.fixture(scope="module")
def project(standin, pod_key, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("runpod")
    proj = without_inference_hosts(workdir, engine_env())
    config = local_inference_hosts()
    config["inferenceHosts"]["local"]["ssh"]["privateKeyPath"] = str(pod_key)  # never used
    config["runpod"] = {"apiUrl": standin.url, "pods": {POD: {
        "gpuTypeIds": ["NVIDIA GeForce RTX 4090"],
        "gpuCount": 1,
        "imageName": "runpod/spear-test:1.0",
        "containerDiskInGb": 20,
        "volumeInGb": 0,
        "cloudType": "COMMUNITY",
        "ports": ["22/tcp"],
        "ssh": {"privateKeyPath": str(pod_key)},
        "vllm": {"model": "Qwen/Qwen3-Coder-Next-FP8", "revision": REVISION,
                 "servedModelName": SERVED, "maxModelLen": 256, "port": VLLM_PORT},
    }}}
    proj.new_stack(STACK, config)
    for name, value in (("runpodApiKey", RUNPOD_KEY), ("vllmApiKey", VLLM_KEY)):
        proj.pulumi("config", "set", "--secret", "--stack", STACK, f"spear-fleet:{name}", value)
    return proj


def pod_outputs(project: Project) -> dict[str, Any]:
    return project.outputs(STACK)["runpod_pods"][POD]


def ssh(out: dict[str, Any], pod_key: Path) -> Session:
    return Session({"host": out["ssh_host"], "port": out["ssh_port"], "user": "root",
                    "private_key": pod_key.read_text(), "host_key": out["ssh_host_key"]["key"]})


def chat(out: dict[str, Any], pod_key: Path) -> str:
    """One chat completion through SSH to the pod, with the vLLM key; its three parts."""
    with ssh(out, pod_key) as pod:
        status, body = pod.http(VLLM_PORT, "POST", "/v1/chat/completions", request_body(SERVED),
                                headers={"Authorization": f"Bearer {VLLM_KEY}"}, timeout=120)
    assert status == 200, body
    return str(judge(json.loads(body)))


def by_hand(standin: RunPodApiStandIn, verb: str, pod_id: str) -> None:
    """What someone does in RunPod's console: the API, with the key."""
    request = urllib.request.Request(f"{standin.url}/pods/{pod_id}/{verb}", method="POST",
                                     headers={"Authorization": f"Bearer {RUNPOD_KEY}"})
    with urllib.request.urlopen(request) as response:
        assert response.status == 200
    standin.wait_idle()


def review(project: Project) -> tuple[str, dict[str, str]]:
    found = parts(project.preview(STACK, "--show-sames"))
    return overall(found), {p.resource: p.change for p in found}


def test_up_creates_the_pod_starts_vllm_and_a_chat_completion_answers_through_ssh(project, standin,
                                                                                  pod_key):
    update = project.up(STACK)
    assert update.ok, update.output
    assert {name: op for name, op in update.ops().items() if name.startswith(POD)} == {
        "gpu": "create", "gpu-pod": "create", "gpu-host-key": "create", "gpu-vllm": "create",
        "gpu-verification": "create", "gpu-smoke-test": "create"}
    out = pod_outputs(project)
    assert out["verified"] == [MODEL_LIST, COMPLETION, TOOL_CALL]
    assert out["smoke_test"] == SMOKE
    pod = standin.pods[out["pod_id"]]
    assert (out["ssh_host"], out["ssh_port"]) == ("127.0.0.1", pod.ssh_port)
    assert pod.fields["env"]["PUBLIC_KEY"].startswith("ssh-ed25519 ")
    assert out["command_line"][:5] == ["vllm", "serve", "Qwen/Qwen3-Coder-Next-FP8", "--revision",
                                       REVISION]
    assert chat(out, pod_key) == SMOKE
    with ssh(out, pod_key) as pod_host:
        processes = pod_host.run("ps -eo args").stdout
        env_mode = pod_host.run("stat -c %a /workspace/spear/config/vllm.env").stdout.strip()
        status, _ = pod_host.http(VLLM_PORT, "POST", "/v1/chat/completions", request_body(SERVED))
    assert "llama-server" in processes and VLLM_KEY not in processes
    assert env_mode == "600"
    assert status == 401  # without the key
    state = project.state_text(STACK)
    assert VLLM_KEY not in state and RUNPOD_KEY not in state


def test_a_second_up_changes_nothing(project, standin):
    assert review(project)[0] == "no changes"
    before = len(standin.requests)
    update = project.up(STACK)
    assert update.ok, update.output
    assert set(update.changes()) == {"same"}
    assert all(method == "GET" for method, _ in standin.requests[before:])


def test_a_new_revision_restarts_vllm_and_keeps_the_pod(project, standin, pod_key):
    before = pod_outputs(project)
    project.set_config(STACK, f"runpod.pods.{POD}.vllm.revision", NEW_REVISION)
    line, changes = review(project)
    assert (line, changes["gpu-vllm"], changes["gpu-pod"]) == (
        "restart vLLM", "restart vLLM", "no change")
    requests = len(standin.requests)
    update = project.up(STACK)
    assert update.ok, update.output
    ops = update.ops()
    assert (ops["gpu-pod"], ops["gpu-vllm"], ops["gpu-verification"]) == ("same", "update", "update")
    after = pod_outputs(project)
    assert (after["pod_id"], after["ssh_port"]) == (before["pod_id"], before["ssh_port"])
    assert after["vllm_started_at"] > before["vllm_started_at"]
    assert all(method == "GET" for method, _ in standin.requests[requests:])
    with ssh(after, pod_key) as pod_host:
        assert f"--revision\n{NEW_REVISION}\n" in pod_host.read("/workspace/spear/config/vllm.args")
        assert f"at {NEW_REVISION} as {SERVED}" in pod_host.read("/workspace/spear/logs/vllm.log")
    assert chat(after, pod_key) == SMOKE


def test_a_pod_restarted_on_a_new_ssh_port_is_found_by_refresh_and_served_again(project, standin,
                                                                                 pod_key):
    before = pod_outputs(project)
    by_hand(standin, "restart", before["pod_id"])
    new_port = standin.pods[before["pod_id"]].ssh_port
    assert new_port != before["ssh_port"]
    refresh = project.refresh(STACK)
    assert refresh.ok, refresh.output
    update = project.up(STACK)
    assert update.ok, update.output
    ops = update.ops()
    assert (ops["gpu-pod"], ops["gpu-vllm"]) == ("same", "update")
    after = pod_outputs(project)
    assert (after["pod_id"], after["ssh_port"]) == (before["pod_id"], new_port)
    assert chat(after, pod_key) == SMOKE


def test_a_pod_stopped_by_hand_is_started_again_by_refresh_and_up(project, standin, pod_key):
    before = pod_outputs(project)
    by_hand(standin, "stop", before["pod_id"])
    refresh = project.refresh(STACK)
    assert refresh.ok, refresh.output
    assert review(project)[1]["gpu-pod"] == "reset pod"
    update = project.up(STACK)
    assert update.ok, update.output
    ops = update.ops()
    assert (ops["gpu-pod"], ops["gpu-vllm"]) == ("update", "update")
    after = pod_outputs(project)
    assert after["pod_id"] == before["pod_id"] and after["ssh_port"] != before["ssh_port"]
    assert chat(after, pod_key) == SMOKE


def test_destroy_deletes_the_pod(project, standin):
    pod_id = pod_outputs(project)["pod_id"]
    destroy = project.destroy(STACK)
    assert destroy.ok, destroy.output
    standin.wait_idle()
    assert standin.pods == {}
    assert ("DELETE", f"/v1/pods/{pod_id}") in standin.requests
    assert host_status(f"pod-{pod_id}") is None
    assert not (cache_dir() / "hosts" / f"pod-{pod_id}").exists()
