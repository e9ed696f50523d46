"""What the config tests share: changing one value of a stack's raw config, reading the
problem a refusal names, running load() the way the program does under mocks, finding refusal
cases that repeat another, and the prod stack with a pod and with REDS endpoints declared."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from config.checker import ConfigError
from config.load import StackConfigError, load
from tests.support import tls
from tests.support.stack_files import (DUMMY_KEY, RecordingMocks, commented_example,
                                       engine_config, prod_raw, tls_pair, without_fleet)

DELETE = object()


def changed(raw: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of raw with the value at path replaced (or deleted with DELETE)."""
    result = copy.deepcopy(raw)
    node = result
    for step in path[:-1]:
        node = node[step]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return result


def problem_line(error: ConfigError | StackConfigError, key: str) -> str:
    lines = [line for line in str(error).splitlines() if line.startswith(f"spear-fleet:{key}: got ")]
    assert lines, f"no line for spear-fleet:{key} in:\n{error}"
    return lines[0]


def run_program(config: dict[str, str], secret_keys: list[str]):
    """load() and then one resource, the way __main__ starts; returns what was loaded."""
    pulumi.runtime.set_all_config(config, secret_keys)
    loaded = []

    @pulumi.runtime.test
    def program():
        stack = load()
        loaded.append(stack)
        pulumi.CustomResource("spear:test:Probe", "probe", {})
        return pulumi.Output.all(*stack.ssh_keys.values()).apply(loaded.extend)

    program()
    return loaded


def allowed_for(mocks: RecordingMocks, raw: dict[str, Any], key: str,
                secret_keys: list[str]) -> str:
    """What the refusal of `raw` says is allowed at `key`. Through load() as the program runs
    it, so it also proves nothing was registered."""
    with pytest.raises(StackConfigError) as error:
        run_program(engine_config(raw), secret_keys)
    assert mocks.registered == []
    line = problem_line(error.value, key)
    assert "; allowed: " in line
    return line.split("; allowed: ", 1)[1]


def repeated_cases(cases: list[tuple[Any, ...]]) -> list[str]:
    """The ids of the refusal cases (id, raw, key, allowed) that repeat an earlier case's id, or
    its config and key: pytest runs a repeated id under a made-up name, and a repeated config
    and key proves nothing the first did not."""
    ids: set[str] = set()
    refusals: list[tuple[dict[str, Any], str]] = []
    repeated = []
    for case_id, raw, key, _allowed in cases:
        if case_id in ids or (raw, key) in refusals:
            repeated.append(case_id)
        ids.add(case_id)
        refusals.append((raw, key))
    return repeated


# prod with the RunPod pod `gpu` serving the cookbook's model.
POD = ("runpod", "pods", "gpu")
VLLM = (*POD, "vllm")
REVISION = "da6e2ed27304dd39abadd9c82ef50e8de67bdd4c"
POD_SECRETS = ["spear-fleet:sshPrivateKeys", "spear-fleet:runpodApiKey", "spear-fleet:vllmApiKey"]
GPU_POD = {
    "gpuTypeIds": ["NVIDIA H100 80GB HBM3"],
    "gpuCount": 2,
    "imageName": "vllm/vllm-openai:v0.24.0",
    "containerDiskInGb": 50,
    "volumeInGb": 200,
    "cloudType": "SECURE",
    "ports": ["22/tcp"],
    "backend": "remote",
    "ssh": {"user": "root"},
    "vllm": {"model": "Qwen/Qwen3-Coder-Next-FP8", "revision": REVISION,
             "servedModelName": "qwen3-coder-next", "tensorParallelSize": 2,
             "maxModelLen": 262144, "port": 8000},
}


def pod_raw() -> dict[str, Any]:
    """prod (without its vLLM fleet) with the pod `gpu` serving the cookbook's model, its key and
    the two API keys."""
    raw = without_fleet(prod_raw())
    raw["runpod"] = {"pods": {"gpu": copy.deepcopy(GPU_POD)}}
    raw["sshPrivateKeys"]["gpu"] = DUMMY_KEY
    return {**raw, "runpodApiKey": "rpa_TESTKEY", "vllmApiKey": "sk-vllm-test"}


# prod with the two kinds of REDS endpoint.
BOX = ("redsEndpoints", "box")  # a server run by hand on a host reached by its ssh alias
NEAR = ("redsEndpoints", "near")  # the server of prod's managed inference host `reds`
REDS_SECRETS = ["spear-fleet:sshPrivateKeys"]


def reds_raw() -> dict[str, Any]:
    """prod with the two kinds of endpoint; `box` on a backend of its own (prod's host has reds)."""
    raw = without_fleet(prod_raw())
    raw["backends"]["lab"] = {"port": 8083}
    raw["redsEndpoints"] = {
        "box": {"ssh": {"host": "reds-box"}, "port": 8010, "modelId": "qwen3-coder-next",
                "backend": "lab"},
        "near": {"inferenceHost": "reds"},
    }
    return raw


# prod with its commented gateway example and developers declared (the gateway's key as a secret,
# the two gateway secrets decrypted to placeholders).
GATEWAY = ("gateway",)
GATEWAY_SECRETS = ["spear-fleet:sshPrivateKeys", "spear-fleet:gatewayMasterKey",
                   "spear-fleet:frontierApiKey", "spear-fleet:gatewayTlsCertificate",
                   "spear-fleet:gatewayTlsKey", "spear-fleet:gatewayBackupKey"]
MASTER_KEY = "sk-master-PLACEHOLDER"
FRONTIER_KEY = "sk-ant-PLACEHOLDER"
BACKUP_KEY = "backup-PLACEHOLDER-0123456789abcdef0123456789"  # gatewayBackupKey: 32 or more


def gateway_raw() -> dict[str, Any]:
    raw = without_fleet(prod_raw())
    raw["gateway"] = commented_example("prod", "gateway")
    del raw["gateway"]["ssh"]["privateKeyPath"]
    raw["sshPrivateKeys"]["gateway"] = DUMMY_KEY
    raw["developers"] = commented_example("prod", "developers")
    # The example's HTTPS listener needs its certificate and key (made here for its name).
    return {**raw, "gatewayMasterKey": MASTER_KEY, "frontierApiKey": FRONTIER_KEY,
            "gatewayBackupKey": BACKUP_KEY, **tls_pair(raw["gateway"]["listen"]["tls"]["name"])}


# prod with the vLLM fleet on Kubernetes: the cookbook's pair as stable, no canary yet.
FLEET = ("vllmFleet",)
FLEET_SECRETS = ["spear-fleet:sshPrivateKeys", "spear-fleet:vllmApiKey", "spear-fleet:kubeconfig"]
NEXT_REVISION = "1234567890abcdef1234567890abcdef12345678"
STABLE_PAIR = {"tag": "v0.24.0", "model": "Qwen/Qwen3-Coder-Next-FP8", "revision": REVISION}
CANARY_PAIR = {"tag": "v0.25.0", "model": "Qwen/Qwen3-Coder-Next-FP8", "revision": NEXT_REVISION}
VLLM_FLEET = {
    "kubeconfig": "ambient",
    "namespace": "vllm",
    "servedModelName": "qwen3-coder-next",
    "stable": STABLE_PAIR,
    "replicas": 2,
    "tensorParallelSize": 2,
    "maxModelLen": 262144,
    "schedulingPriority": True,
    "tenancy": {"cacheSalt": "team"},
    "modelCache": {"size": "200Gi"},
    "agentSandbox": {"namespace": "agents",
                     "mirrors": {"pypi": {"cidr": "10.20.1.0/24", "ports": [443]}}},
    "observability": {"preemptionsPerHour": 30},
    # A gateway host that routes coder here connects from it (the ingress policy's ipBlock).
    "ingressFrom": ["10.20.0.10/32"],
}


def fleet_raw(**fleet: Any) -> dict[str, Any]:
    """prod with the test fleet (its keys overridden by `fleet`), the ambient kubeconfig, and
    vLLM's API key; with a rolloutGate, the gateway too, whose master key checks the records'
    receipts."""
    raw = gateway_raw() if "rolloutGate" in fleet else without_fleet(prod_raw())
    raw["vllmFleet"] = {**copy.deepcopy(VLLM_FLEET), **copy.deepcopy(fleet)}
    return {**raw, "vllmApiKey": "sk-vllm-test"}


# prod with its commented gateway (moved into the fleet's cluster, serving TLS) and developers,
# the test fleet, and the seat `ana-codex`: ana's key in a sandboxed pod running Codex (the seat
# image pinned by digest).
SEAT_IMAGE = "registry.example.com/spear/seat:2026.07@sha256:" + "3c" * 32
NODE_GUARD_IMAGE = "registry.example.com/spear/node-guard:1.0.6@sha256:" + "5d" * 32
SEATS = ("vllmFleet", "agentSandbox", "seats")
# Seats reach the gateway by this name, which they resolve to its Service's fixed address.
SEATS_GATEWAY_NAME = "gateway.spear.internal"
SEATS_GATEWAY_IP = "10.96.100.42"
SEATS_GATEWAY_URL = f"https://{SEATS_GATEWAY_NAME}:4000"
SEATS_TLS_CERTIFICATE, SEATS_TLS_KEY = tls.issue(SEATS_GATEWAY_NAME)
SEATS_DATABASE_URL = "postgresql://litellm:pw-SECRET-db@db.internal:5432/litellm"
SEAT_SECRETS = ["spear-fleet:sshPrivateKeys", "spear-fleet:gatewayMasterKey",
                "spear-fleet:frontierApiKey", "spear-fleet:gatewayDatabaseUrl",
                "spear-fleet:gatewayTlsCertificate", "spear-fleet:gatewayTlsKey",
                "spear-fleet:vllmApiKey"]


def seats_raw(**seats: Any) -> dict[str, Any]:
    """gateway_raw() in the fleet's cluster, serving TLS as SEATS_GATEWAY_NAME at a fixed Service
    address, with the test fleet and vLLM's key, and in its sandbox the seat image, bob's key for
    the dialect checks and `seats` (default: ana's Codex seat)."""
    raw = gateway_raw()
    gateway = raw["gateway"]
    for key in ("ssh", "runtimeDir", "listen"):
        gateway.pop(key, None)
    del raw["sshPrivateKeys"]["gateway"]
    gateway["kubernetes"] = {"image": "registry.example.com/spear/litellm-gateway:1.91.1",
                             "serviceIP": SEATS_GATEWAY_IP, "tls": {"name": SEATS_GATEWAY_NAME}}
    gateway["database"] = {"location": "external"}
    del raw["gatewayBackupKey"]  # an external database is backed up where it runs
    gateway["coder"]["upstreams"] = ["vllmFleet"]
    raw["vllmFleet"] = copy.deepcopy(VLLM_FLEET)
    raw["vllmFleet"]["serviceIPs"] = {"stable": "10.96.100.10"}
    raw["vllmFleet"]["agentSandbox"].update(seatImage=SEAT_IMAGE, dialectCheckDeveloper="bob",
                                            nodeGuard={"image": NODE_GUARD_IMAGE},
                                            seats=copy.deepcopy(seats or {"ana-codex": {
                                                "developer": "ana", "harness": "codex"}}))
    return {**raw, "vllmApiKey": "sk-vllm-test", "gatewayDatabaseUrl": SEATS_DATABASE_URL,
            "gatewayTlsCertificate": SEATS_TLS_CERTIFICATE, "gatewayTlsKey": SEATS_TLS_KEY}


def promoted_raw(gate: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fleet after the canary was promoted: stable is the canary's pair, previous the old one;
    `gate`: its rolloutGate (tests/support/gate_records.py::gate_config)."""
    return fleet_raw(stable=CANARY_PAIR, previous=STABLE_PAIR,
                     **({} if gate is None else {"rolloutGate": gate}))
