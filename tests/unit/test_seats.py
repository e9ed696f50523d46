"""spear/seats.py: the seat's minimum sandbox (seed 001 step 7) as a predicate over a pod spec.
A seat the component renders has all of it, for every harness; a pod missing any one item is
refused naming that item, and only it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from components.agent_seats import manifests
from components.gateway.render import coder_window
from config.load import parse_stack
from spear import harness
from spear.seats import image_digest_problem, is_credential_name, pod_spec, seat_problems
from tests.support.config_cases import SEAT_IMAGE, SEATS_GATEWAY_URL, seats_raw

ALL_HARNESSES = {f"seat-{h}": {"developer": "ana", "harness": h} for h in harness.HARNESSES}


def rendered(seat_name: str = "ana-codex", **seats: Any) -> dict[str, Any]:
    """The pod spec of a seat as components/agent_seats/manifests.py renders it."""
    cfg = parse_stack(seats_raw(**seats))
    sandbox = cfg.vllm_fleet.agent_sandbox
    seat = sandbox.seats[seat_name]
    entry = manifests.wiring(seat, SEATS_GATEWAY_URL, cfg.harnesses, coder_window(cfg))
    return manifests.deployment(sandbox, seat, entry, manifests.GatewayTrust.of(
        cfg.gateway))["spec"]["template"]["spec"]


def harness_container(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["containers"][0]


@pytest.mark.parametrize("seat", sorted(ALL_HARNESSES))
def test_a_rendered_seat_of_every_harness_has_the_whole_minimum(seat):
    assert seat_problems(rendered(seat, **ALL_HARNESSES)) == []


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        node = spec
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
    return change


def _delete(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        node = spec
        for step in path[:-1]:
            node = node[step]
        del node[path[-1]]
    return change


def _append(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        node = spec
        for step in path:
            node = node[step]
        node.append(value)
    return change


def _both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        for one in changes:
            one(spec)
    return change


HARNESS_CONTEXT = ("containers", 0, "securityContext")
HARNESS_ENV = ("containers", 0, "env")
HARNESS_MOUNTS = ("containers", 0, "volumeMounts")
SOCKET = {"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}

# Items of the pod's context: each of its two containers (the init container too) misses them.
POD_LEVEL = ("runAs", "seccompProfile")

# (id, what is taken away, what the refusal names)
MISSING = [
    ("root-user", _set(("securityContext", "runAsUser"), 0), "runAsUser is 0, not 1000"),
    ("a-container-that-runs-as-root", _set((*HARNESS_CONTEXT, "runAsUser"), 0),
     "container 'harness': runAsUser is 0, not 1000"),
    ("no-user-at-all", _delete(("securityContext", "runAsUser")), "runAsUser is None, not 1000"),
    ("another-group", _set(("securityContext", "runAsGroup"), 0), "runAsGroup is 0, not 1000"),
    ("root-allowed", _set(("securityContext", "runAsNonRoot"), False), "runAsNonRoot is not true"),
    ("new-privileges", _delete((*HARNESS_CONTEXT, "allowPrivilegeEscalation")),
     "allowPrivilegeEscalation is not false (no new privileges)"),
    ("privileged", _set((*HARNESS_CONTEXT, "privileged"), True), "container 'harness': runs privileged"),
    ("writable-root", _set((*HARNESS_CONTEXT, "readOnlyRootFilesystem"), False),
     "readOnlyRootFilesystem is not true"),
    ("capabilities-kept", _set((*HARNESS_CONTEXT, "capabilities"), {"drop": ["NET_RAW"]}),
     "capabilities do not drop ALL"),
    ("a-capability-added", _set((*HARNESS_CONTEXT, "capabilities"), {"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
     "adds capabilities ['SYS_ADMIN']"),
    ("seccomp-unconfined", _set(("securityContext", "seccompProfile"), {"type": "Unconfined"}),
     "seccompProfile is 'Unconfined', not RuntimeDefault or Localhost"),
    ("service-account-token", _delete(("automountServiceAccountToken",)),
     "automountServiceAccountToken is not false"),
    ("host-network", _set(("hostNetwork",), True), "hostNetwork is true"),
    ("host-pid", _set(("hostPID",), True), "hostPID is true"),
    ("host-ipc", _set(("hostIPC",), True), "hostIPC is true"),
    ("the-container-socket", _both(_append(("volumes",), SOCKET), _append(
        HARNESS_MOUNTS, {"name": "docker", "mountPath": "/var/run/docker.sock", "readOnly": True})),
     "volume 'docker' mounts a path of the node (hostPath)"),
    ("ssh-keys-from-a-secret", _append(("volumes",), {"name": "ssh", "secret": {"secretName": "ssh"}}),
     "volume 'ssh' is secret: only the workspace volume"),
    # Even mounted read-only: the working copy is the one place that holds data.
    ("a-second-data-volume", _both(
        _append(("volumes",), {"name": "cache", "emptyDir": {}}),
        _append(HARNESS_MOUNTS, {"name": "cache", "mountPath": "/cache", "readOnly": True})),
     "volume 'cache' is emptyDir: only the workspace volume (emptyDir or persistentVolumeClaim)"),
    ("the-wiring-writable", _delete((*HARNESS_MOUNTS, 2, "readOnly")),
     "mounts 'wiring' at '/workspace/.home/.codex/config.toml' writable"),
    ("the-gateways-root-writable", _delete((*HARNESS_MOUNTS, 1, "readOnly")),
     "mounts 'gateway-ca' at '/etc/spear-fleet/gateway-ca.pem' writable"),
    ("the-workspace-over-the-image", _set((*HARNESS_MOUNTS, 0, "mountPath"), "/usr"),
     "mounts 'workspace' at '/usr' writable: only the workspace volume at /workspace may be"),
    ("a-service-account-token-projected", _append(("volumes",), {"name": "token", "projected": {
        "sources": [{"serviceAccountToken": {"path": "token"}}]}}),
     "volume 'token' projects serviceAccountToken"),
    ("an-image-by-tag", _set(("containers", 0, "image"), "registry.example.com/spear/seat:2026.07"),
     "container 'harness': image 'registry.example.com/spear/seat:2026.07' has no @sha256 digest"),
    ("an-init-image-by-tag", _set(("initContainers", 1, "image"), "busybox:1.36"),
     "container 'home': image 'busybox:1.36' has no @sha256 digest"),
    ("the-key-as-a-literal", _set((*HARNESS_ENV, 2), {"name": "OWNED_API_KEY", "value": "sk-ana-VIRTUAL"}),
     "env OWNED_API_KEY holds a key as a literal value"),
    ("a-credential-as-a-literal", _append(HARNESS_ENV, {"name": "GITHUB_TOKEN", "value": "ghp_x"}),
     "env GITHUB_TOKEN is a credential given as a literal value (only valueFrom.secretKeyRef)"),
    ("a-key-under-another-name", _append(HARNESS_ENV, {"name": "NOTES", "value": "use sk-live-123456"}),
     "env NOTES holds a key as a literal value"),
    ("a-credential-from-a-config-map", _set((*HARNESS_ENV, 2), {"name": "OWNED_API_KEY", "valueFrom": {
        "configMapKeyRef": {"name": "keys", "key": "ana"}}}),
     "env OWNED_API_KEY is a credential not taken from a Secret"),
    ("an-environment-from-a-config-map", _set(("containers", 0, "envFrom"), [{"configMapRef": {"name": "env"}}]),
     "takes its environment from ConfigMap 'env'"),
]


@pytest.mark.parametrize("_id, change, named", MISSING, ids=[case[0] for case in MISSING])
def test_a_pod_missing_one_item_of_the_minimum_is_refused_naming_that_item_only(_id, change, named):
    spec = copy.deepcopy(rendered())
    change(spec)
    problems = seat_problems(spec)
    # One problem, or one per container (the guarded wait, home, the harness) for an item of the
    # pod's own context.
    assert problems and all(named in problem for problem in problems), problems
    assert len(problems) == (3 if named.startswith(POD_LEVEL) else 1), problems


def test_every_missing_item_is_reported_at_once():
    spec = copy.deepcopy(rendered())
    for _, change, _ in MISSING[:12]:
        change(spec)
    assert len(seat_problems(spec)) >= 12


def test_a_spec_without_containers_or_no_spec_at_all_is_refused():
    assert seat_problems(None) == ["no pod spec"]
    assert seat_problems({**rendered(), "containers": [], "initContainers": []})[-1] == "no container"


def test_an_image_is_pinned_only_by_its_digest():
    assert image_digest_problem(SEAT_IMAGE) is None
    assert image_digest_problem("registry.example.com/spear/seat@sha256:" + "0" * 64) is None
    assert "has no @sha256 digest" in image_digest_problem("registry.example.com/spear/seat:2026.07")
    assert "is not an image reference" in image_digest_problem("Seat Image")
    assert "is not an image reference" in image_digest_problem(None)


def test_a_credentials_name_is_told_by_its_words_not_its_letters():
    assert all(is_credential_name(n) for n in ("OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN",
                                               "LLM_API_KEY", "DB_PASSWORD", "aws-secret"))
    assert not any(is_credential_name(n) for n in ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "KEYBOARD",
                                                   "OPENAI_BASE_URL", "HOME"))


def test_the_pod_spec_of_each_workload_kind_is_found_where_it_keeps_it():
    template = {"spec": {"containers": []}}
    assert pod_spec("Pod", {"spec": {"containers": []}}) == {"containers": []}
    for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        assert pod_spec(kind, {"spec": {"template": template}}) == {"containers": []}
    assert pod_spec("CronJob", {"spec": {"jobTemplate": {"spec": {"template": template}}}}) == {
        "containers": []}
    assert pod_spec("Deployment", {"metadata": {}}) is None
