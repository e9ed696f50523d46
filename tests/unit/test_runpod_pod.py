"""The RunPod pod resource against RunPod's contract: which changes the API can make in place,
how the resource drives the API (through the contract-checking stand-in, whose machines are only
ports here), and what the component declares under Pulumi's mocks."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from components.endpoints import pod_vllm, runpod_pod
from components.endpoints.pod_vllm import PodVllmProvider
from components.endpoints.runpod_endpoint import public_key_line
from components.endpoints.runpod_pod import (CREATE_ONLY, UPDATABLE, RunPodError,
                                             RunPodPodProvider)
from components.hostops.ssh import RemoteError, Result
from spear import tokens
from tests.support.policy_harness import COOKBOOK_VLLM_COMMAND_LINE
from tests.support.runpod_api_standin import Contract, PortsOnly, RunPodApiStandIn
from tests.support.stack_files import mocked_stack, run_main
from tests.support.config_cases import POD_SECRETS as SECRETS, pod_raw

KEY = "rpa_STANDIN"
REAL_API = "https://rest.runpod.io/v1"


def pod_props(api_url: str = REAL_API, **changes: Any) -> dict[str, Any]:
    """The pod resource's inputs as the component gives them."""
    return {"api_url": api_url, "api_key": KEY, "name": "spear-test-gpu",
            "image_name": "vllm/vllm-openai:v0.24.0", "gpu_type_ids": ["NVIDIA H100 80GB HBM3"],
            "gpu_count": 2, "cloud_type": "SECURE", "container_disk_in_gb": 50,
            "volume_in_gb": 200, "ports": ["22/tcp"], "env": {"PUBLIC_KEY": "ssh-ed25519 AAAA"},
            "ready_timeout_seconds": 10, **changes}


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract()


@pytest.fixture
def api(contract, monkeypatch):
    monkeypatch.setattr(runpod_pod, "POLL_SECONDS", 0.05)
    with RunPodApiStandIn(KEY, PortsOnly(), contract) as standin:
        yield standin


def call(api: RunPodApiStandIn, method: str, path: str, body: Any = None,
         key: str | None = KEY) -> tuple[int, Any]:
    request = urllib.request.Request(
        api.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


# ---------------------------------------------------------------------------------------------
# The contract decides what is an update and what is a new pod


def test_what_the_pod_updates_in_place_is_what_pod_update_input_takes(contract):
    update_input = contract.schema("PodUpdateInput")["properties"]
    create_input = contract.schema("PodCreateInput")["properties"]
    assert set(UPDATABLE.values()) <= set(update_input)
    assert set(CREATE_ONLY.values()) <= set(create_input) - set(update_input)


def test_a_new_gpu_recreates_the_pod_a_new_image_updates_it_and_a_new_key_changes_nothing():
    provider = RunPodPodProvider()
    olds = {**pod_props(), "desired_status": "RUNNING"}
    for prop, value in (("gpu_type_ids", ["NVIDIA L4"]), ("gpu_count", 4),
                        ("cloud_type", "COMMUNITY")):
        assert provider.diff("p", olds, {**olds, prop: value}).replaces == [prop]
    result = provider.diff("p", olds, {**olds, "image_name": "vllm/vllm-openai:v0.25.0"})
    assert (result.changes, result.replaces) == (True, [])
    assert provider.diff("p", olds, {**olds, "api_key": "rpa_OTHER"}).changes is False


def test_a_pod_that_refresh_found_stopped_is_a_change():
    olds = {**pod_props(), "desired_status": "EXITED"}
    assert RunPodPodProvider().diff("p", olds, pod_props()).changes is True


def test_a_new_vllm_flag_restarts_vllm_and_a_new_pod_starts_it_anew():
    provider = PodVllmProvider()
    olds = {"pod_id": "a", "command_line": COOKBOOK_VLLM_COMMAND_LINE, "running": True,
            "endpoint": {"host": "1.2.3.4", "port": 10341}}
    flagged = {**olds, "command_line": [*COOKBOOK_VLLM_COMMAND_LINE, "--max-num-seqs", "4"]}
    assert (provider.diff("v", olds, flagged).changes, provider.diff("v", olds, flagged).replaces) == (True, [])
    moved = {**olds, "endpoint": {"host": "1.2.3.4", "port": 10999}}
    assert provider.diff("v", olds, moved).changes is True
    assert provider.diff("v", {**olds, "running": False}, olds).changes is True
    assert provider.diff("v", olds, {**olds, "pod_id": "b"}).replaces == ["pod_id"]
    assert provider.diff("v", olds, dict(olds)).changes is False


class LoadingPod:
    """A pod whose vLLM never gets healthy; its tmux session lives while `alive`."""

    def __init__(self, alive: bool) -> None:
        self.alive, self.health_checks = alive, 0

    def run(self, command: str, check: bool = True) -> Result:
        if command.startswith("tmux has-session"):
            return Result(0 if self.alive else 1, "", "")
        return Result(0, "torch.OutOfMemoryError: CUDA out of memory\n", "")  # the log's tail

    def http(self, port: int, method: str, path: str, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        self.health_checks += 1
        return 503, b""


READY_PROPS = {"port": 8000, "ready_timeout_seconds": 0.1}


def test_a_vllm_that_exits_while_loading_fails_at_once_with_the_end_of_its_log():
    pod = LoadingPod(alive=False)
    with pytest.raises(RemoteError, match="vLLM exited \\(tmux session spear-vllm\\); /v.log"
                                          " ends:\ntorch.OutOfMemoryError"):
        pod_vllm._wait_ready(pod, READY_PROPS, "/v.log")
    assert pod.health_checks == 1


def test_a_vllm_that_stays_unhealthy_fails_once_its_time_is_up():
    with pytest.raises(RemoteError, match="vLLM is not healthy after 0.1 s \\(tmux session"
                                          " spear-vllm\\); /v.log ends:\ntorch.OutOfMemoryError"):
        pod_vllm._wait_ready(LoadingPod(alive=True), READY_PROPS, "/v.log")


# ---------------------------------------------------------------------------------------------
# The stand-in holds requests to the contract


def test_the_standin_refuses_a_request_without_the_key_in_the_contracts_shape(api):
    assert call(api, "GET", "/pods/x", key=None) == (
        401, {"message": "Unauthorized: missing or invalid bearer API key"})
    assert call(api, "GET", "/pods/x", key="rpa_WRONG")[0] == 401


@pytest.mark.parametrize("body,refusal", [
    ({"imageName": "x:1", "gpuTypes": ["NVIDIA L4"]}, "body.gpuTypes: unknown field"),
    ({"imageName": "x:1", "gpuCount": "2"}, "body.gpuCount: expected integer, got str"),
    ({"imageName": "x:1", "gpuCount": 0}, "body.gpuCount: 0 is below the minimum 1"),
    ({"imageName": "x:1", "cloudType": "PRIVATE"}, "body.cloudType: 'PRIVATE' is not one of"),
    ({"imageName": "x:1", "gpuTypeIds": ["NVIDIA X9000"]}, "body.gpuTypeIds[0]: 'NVIDIA X9000'"),
    ({"imageName": "x:1", "env": {"A": 1}}, "body.env.A: expected string, got int"),
    ({"imageName": "x:1", "ports": ["22/udp"]}, "body.ports[0]: '22/udp' is not"),
    ([], "body: expected object, got list"),
])
def test_the_standin_refuses_what_the_create_schema_refuses(api, body, refusal):
    status, answer = call(api, "POST", "/pods", body)
    assert (status, answer["status"]) == (400, 400)
    assert refusal in answer["error"]
    assert api.pods == {}


def test_the_standin_refuses_a_gpu_change_in_an_update_as_the_contract_does(api):
    status, pod = call(api, "POST", "/pods", {"imageName": "x:1", "gpuCount": 1})
    assert status == 201
    status, answer = call(api, "PATCH", f"/pods/{pod['id']}", {"gpuCount": 2})
    assert (status, answer["error"]) == (400, "body.gpuCount: unknown field")


def test_the_standin_moves_sshd_to_a_new_port_on_every_restart_and_forgets_a_deleted_pod(api):
    status, pod = call(api, "POST", "/pods", {"imageName": "x:1", "ports": ["22/tcp"]})
    assert (status, pod["publicIp"], pod["portMappings"]) == (201, None, {})
    api.wait_idle()
    first = call(api, "GET", f"/pods/{pod['id']}")[1]
    assert (first["desiredStatus"], first["publicIp"]) == ("RUNNING", "127.0.0.1")
    assert call(api, "POST", f"/pods/{pod['id']}/restart")[0] == 200
    api.wait_idle()
    second = call(api, "GET", f"/pods/{pod['id']}")[1]
    assert second["portMappings"]["22"] != first["portMappings"]["22"]
    assert second["lastStartedAt"] != first["lastStartedAt"]
    assert call(api, "DELETE", f"/pods/{pod['id']}") == (204, None)
    assert call(api, "GET", f"/pods/{pod['id']}")[0] == 404


# ---------------------------------------------------------------------------------------------
# The resource drives the API


def test_create_reads_the_ssh_endpoint_from_the_api(api):
    created = RunPodPodProvider().create(pod_props(api.url))
    pod = api.pods[created.id]
    assert created.outs["ssh_host"] == "127.0.0.1"
    assert created.outs["ssh_port"] == pod.ssh_port == api.machines.running[created.id]
    assert created.outs["desired_status"] == "RUNNING"
    assert pod.fields["env"] == {"PUBLIC_KEY": "ssh-ed25519 AAAA"}
    assert pod.fields["supportPublicIp"] is True


def test_numbers_reach_the_api_as_integers_though_the_engine_gives_floats(api):
    props = pod_props(api.url, gpu_count=2.0, container_disk_in_gb=50.0, volume_in_gb=200.0)
    created = RunPodPodProvider().create(props)
    fields = api.pods[created.id].fields
    assert [type(fields[f]) for f in ("gpuCount", "containerDiskInGb", "volumeInGb")] == [int] * 3


def test_read_sees_a_restart_and_a_stop_by_hand_and_update_starts_the_pod_again(api):
    provider = RunPodPodProvider()
    created = provider.create(pod_props(api.url))
    call(api, "POST", f"/pods/{created.id}/restart")
    api.wait_idle()
    restarted = provider.read(created.id, created.outs).outs
    assert restarted["ssh_port"] != created.outs["ssh_port"]
    assert provider.diff(created.id, restarted, pod_props(api.url)).changes is False
    call(api, "POST", f"/pods/{created.id}/stop")
    stopped = provider.read(created.id, restarted).outs
    assert (stopped["desired_status"], stopped["ssh_host"], stopped["ssh_port"]) == ("EXITED", None, None)
    assert provider.diff(created.id, stopped, pod_props(api.url)).changes is True
    started = provider.update(created.id, stopped, pod_props(api.url)).outs
    assert started["desired_status"] == "RUNNING" and started["ssh_port"] not in (None, restarted["ssh_port"])


def test_an_update_patches_only_what_changed_and_waits_for_the_reset(api):
    provider = RunPodPodProvider()
    created = provider.create(pod_props(api.url))
    news = pod_props(api.url, image_name="vllm/vllm-openai:v0.25.0")
    updated = provider.update(created.id, created.outs, news).outs
    assert api.pods[created.id].fields["imageName"] == "vllm/vllm-openai:v0.25.0"
    assert ("PATCH", f"/v1/pods/{created.id}") in api.requests
    assert updated["image_name"] == "vllm/vllm-openai:v0.25.0"
    assert updated["last_started_at"] != created.outs["last_started_at"]
    assert updated["ssh_port"] != created.outs["ssh_port"]


def test_read_sees_an_image_changed_by_hand_and_a_deleted_pod(api):
    provider = RunPodPodProvider()
    created = provider.create(pod_props(api.url))
    call(api, "PATCH", f"/pods/{created.id}", {"imageName": "someone/else:1"})
    api.wait_idle()
    drifted = provider.read(created.id, created.outs).outs
    assert drifted["image_name"] == "someone/else:1"
    assert provider.diff(created.id, drifted, pod_props(api.url)).changes is True
    provider.delete(created.id, drifted)
    assert created.id not in api.pods
    assert provider.read(created.id, drifted).id is None
    provider.delete(created.id, drifted)  # already gone is what a delete wants


class NoEndpointYet:
    """An API whose pod runs, restarting, and never gets a public IP."""

    def __init__(self) -> None:
        self.asked = 0

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        self.asked += 1
        return {"id": "p1", "desiredStatus": "RUNNING", "publicIp": "", "portMappings": {},
                "lastStartedAt": f"start {self.asked}"}


def test_a_pod_that_never_gets_an_ssh_endpoint_fails_with_what_the_api_said_last(monkeypatch):
    monkeypatch.setattr(runpod_pod, "POLL_SECONDS", 0.05)
    api = NoEndpointYet()
    with pytest.raises(RunPodError, match="pod p1 has no SSH endpoint after 0.2 s") as error:
        runpod_pod._wait_ready(api, "p1", {"ready_timeout_seconds": 0.2}, started_before=None)
    assert api.asked > 1 and str(error.value).endswith(f"lastStartedAt start {api.asked})")


def test_a_wrong_key_fails_with_the_status_and_never_shows_the_key(api):
    with pytest.raises(RunPodError) as error:
        RunPodPodProvider().create(pod_props(api.url, api_key="rpa_WRONG_SECRET"))
    assert error.value.status == 401
    assert "rpa_WRONG_SECRET" not in str(error.value)


# ---------------------------------------------------------------------------------------------
# The component under Pulumi's mocks


def private_key() -> str:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()


@pytest.fixture
def pod_program():
    key = private_key()
    raw = pod_raw()
    raw["sshPrivateKeys"]["gpu"] = key
    with mocked_stack(raw, SECRETS) as mocks:
        yield mocks, key


def test_a_declared_pod_is_an_endpoint_of_a_pod_and_vllm_each_with_its_own_type(pod_program):
    mocks, key = pod_program
    run_main()
    types = {name: args.typ for name, args in mocks.resources.items() if name.startswith("gpu")}
    assert types == {"gpu": tokens.RUNPOD_ENDPOINT, "gpu-pod": tokens.RUNPOD_POD.type,
                     "gpu-vllm": tokens.POD_VLLM.type,
                     "gpu-verification": tokens.ENDPOINT_VERIFICATION.type,
                     "gpu-smoke-test": tokens.SMOKE_TEST.type,
                     "gpu-host-key": tokens.HOST_KEY.type}
    pod = mocks.resources["gpu-pod"].inputs
    assert pod["env"] == {"PUBLIC_KEY": public_key_line(key)}
    assert (pod["name"], pod["image_name"], pod["gpu_count"]) == (
        "spear-prod-gpu", "vllm/vllm-openai:v0.24.0", 2)
    vllm = mocks.resources["gpu-vllm"].inputs
    assert vllm["command_line"] == COOKBOOK_VLLM_COMMAND_LINE
    assert vllm["env_file"] == {"path": "/workspace/spear/config/vllm.env", "mode": 0o600,
                                "variable": "VLLM_API_KEY"}
    assert "sk-vllm-test" not in json.dumps(pod) and "sk-vllm-test" not in vllm["command_line"]
