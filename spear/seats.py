"""An agent seat's sandbox (seed 001 step 7, "Sandbox what the agent executes"): the concrete
minimum for one seat, as a predicate over a Kubernetes pod spec, and the vocabulary the seat's
objects carry (components/agent_seats/manifests.py writes them; the policy pack and the preview
summary read them).

The minimum: the harness runs as user 1000 (group 1000), never as root, without new privileges
and with every capability dropped, on a read-only root filesystem under the runtime's seccomp
profile; no service account token, no host network, PID or IPC namespace; the working copy
(the `workspace` volume at /workspace) is the only writable mount and nothing from the host is
mounted (no home directory, no ~/.ssh, no container socket); every image is pinned by digest;
and the developer's virtual key is the only credential, reaching the seat as an environment
variable from a Secret (`secretKeyRef`), never as a literal value.

Pure: standard library only, so the policy pack's virtualenv imports it as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from spear.rules import IMAGE

SEAT_USER = 1000  # the harness's user and group (the cookbook's --user 1000:1000)
WORKSPACE_VOLUME = "workspace"  # the working copy: the seat's one writable mount
WORKSPACE = "/workspace"
HOME = f"{WORKSPACE}/.home"  # the harness's HOME: inside the working copy, never the image's
TMP = f"{WORKSPACE}/.tmp"  # TMPDIR: the root filesystem is read-only

# The labels and annotations of a seat's objects.
SEAT = "spear-fleet/seat"
DEVELOPER = "spear-fleet/developer"
HARNESS = "spear-fleet/harness"
HARNESS_VERSION = "spear-fleet/harness-version"  # what `harnesses.<harness>` pins
KEY_ROTATION = "spear-fleet/key-rotation"  # developers.<name>.rotation: a rotation restarts the seat
WIRING_SHA256 = "spear-fleet/wiring-sha256"  # the wiring files: a change restarts the seat
# A harness's dialect check (components/agent_seats): one turn of the real harness through the
# gateway, a Job per seated harness, run again at each bump; its objects are `seat-dialect-<harness>`.
DIALECT_CHECK = "spear-fleet/dialect-check"  # its label: the harness it checks
DIALECT_CHECK_PREFIX = "dialect-"
# The node guard's annotation on a seat's pod: the addresses its node's guard filters
# (components/agent_seats/node_guard.py), which the pod waits for before its harness starts.
NODE_GUARD = "spear-fleet/node-guard"
NODE_GUARD_APP = "node-guard"  # its objects' app.kubernetes.io/name (and their name)
NODE_GUARD_TABLE = "spear-seat-guard"  # its nftables table (family inet) on each node
# The agent namespace's label naming the RuntimeClass its workloads must run with
# (agentSandbox.runtimeClass), which the policy pack reads back.
RUNTIME_CLASS = "spear-fleet/runtime-class"

IMAGE_DIGEST_TEXT = "an image pinned by digest, repository[:tag]@sha256:<64 lowercase hex>"
# Where the workspace may come from: a volume of the pod's own or a claim (a disposable or a
# kept checkout). Every other volume is read-only content: ConfigMaps and the downward API.
_WORKSPACE_SOURCES = ("emptyDir", "persistentVolumeClaim")
_READ_ONLY_SOURCES = ("configMap", "downwardAPI")
_PROJECTED_SOURCES = ("configMap", "downwardAPI")
_SECCOMP = ("RuntimeDefault", "Localhost")
# An environment variable whose name says it holds a credential (OPENAI_API_KEY,
# ANTHROPIC_AUTH_TOKEN, ...; not CLAUDE_CODE_MAX_OUTPUT_TOKENS), or a value shaped like a
# gateway key, must come from a Secret.
_CREDENTIAL_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD",
                               "CREDENTIAL", "CREDENTIALS"})
_KEY_VALUE = re.compile(r"sk-[A-Za-z0-9_-]{4,}")


def image_digest_problem(image: object) -> str | None:
    """Why an image reference is not pinned by digest; None when it is."""
    match = IMAGE.fullmatch(image) if isinstance(image, str) else None
    if match is None:
        return f"{image!r} is not an image reference"
    if not match["digest"]:
        return f"{image!r} has no @sha256 digest (a tag can be pushed again)"
    return None


def is_credential_name(name: object) -> bool:
    return isinstance(name, str) and bool(
        _CREDENTIAL_WORDS & set(re.split(r"[_\-.]", name.upper())))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def _is_number(value: Any, expected: int) -> bool:
    # The engine's JSON numbers are floats (1000.0).
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == expected


def _volume_problems(volumes: list[Any]) -> tuple[list[str], set[str]]:
    """The problems of the pod's volumes, and the names of the ones that may be written."""
    problems, writable = [], set()
    for volume in volumes:
        volume = _mapping(volume)
        name = volume.get("name")
        sources = [key for key in volume if key != "name"]
        if "hostPath" in sources:
            problems.append(f"volume {name!r} mounts a path of the node (hostPath): nothing of the"
                            " host, no home, no ~/.ssh, no container socket")
        elif name == WORKSPACE_VOLUME and sources and all(s in _WORKSPACE_SOURCES for s in sources):
            writable.add(name)
        elif sources == ["projected"]:
            kinds = {kind for source in _items(_mapping(volume["projected"]).get("sources"))
                     for kind in _mapping(source)}
            if not kinds <= set(_PROJECTED_SOURCES):
                problems.append(f"volume {name!r} projects {', '.join(sorted(kinds - set(_PROJECTED_SOURCES)))}:"
                                " the key is the only credential, and it comes as an environment"
                                " variable")
        elif not (sources and all(s in _READ_ONLY_SOURCES for s in sources)):
            problems.append(f"volume {name!r} is {', '.join(sources) or 'of no kind'}: only the"
                            f" {WORKSPACE_VOLUME} volume ({' or '.join(_WORKSPACE_SOURCES)}) holds"
                            " data; other volumes may be ConfigMaps or the downward API, read-only")
    return problems, writable


def _container_problems(container: Mapping[str, Any], pod_context: Mapping[str, Any],
                        writable: set[str]) -> list[str]:
    what = f"container {container.get('name')!r}"
    context = _mapping(container.get("securityContext"))
    problems = []
    image = image_digest_problem(container.get("image"))
    if image:
        problems.append(f"{what}: image {image}")

    def effective(key: str) -> Any:
        return context[key] if context.get(key) is not None else pod_context.get(key)

    for key in ("runAsUser", "runAsGroup"):
        if not _is_number(effective(key), SEAT_USER):
            problems.append(f"{what}: {key} is {effective(key)!r}, not {SEAT_USER}")
    if effective("runAsNonRoot") is not True:
        problems.append(f"{what}: runAsNonRoot is not true")
    if context.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{what}: allowPrivilegeEscalation is not false (no new privileges)")
    if context.get("privileged") is True:
        problems.append(f"{what}: runs privileged")
    if context.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{what}: readOnlyRootFilesystem is not true (the workspace is the only"
                        " writable place)")
    capabilities = _mapping(context.get("capabilities"))
    if "ALL" not in _items(capabilities.get("drop")):
        problems.append(f"{what}: capabilities do not drop ALL")
    if _items(capabilities.get("add")):
        problems.append(f"{what}: adds capabilities {list(_items(capabilities.get('add')))}")
    seccomp = _mapping(effective("seccompProfile")).get("type")
    if seccomp not in _SECCOMP:
        problems.append(f"{what}: seccompProfile is {seccomp!r}, not {' or '.join(_SECCOMP)}")
    for mount in _items(container.get("volumeMounts")):
        mount = _mapping(mount)
        if mount.get("readOnly") is True:
            continue
        if mount.get("name") not in writable or mount.get("mountPath") != WORKSPACE:
            problems.append(f"{what}: mounts {mount.get('name')!r} at {mount.get('mountPath')!r}"
                            f" writable: only the {WORKSPACE_VOLUME} volume at {WORKSPACE} may be"
                            " (every other mount readOnly)")
    for entry in _items(container.get("env")):
        entry = _mapping(entry)
        name, value = entry.get("name"), entry.get("value")
        source = _mapping(entry.get("valueFrom"))
        if isinstance(value, str) and _KEY_VALUE.search(value):
            problems.append(f"{what}: env {name} holds a key as a literal value")
        elif is_credential_name(name) and (value is not None or "secretKeyRef" not in source):
            problems.append(f"{what}: env {name} is a credential "
                            + ("given as a literal value" if value is not None
                               else "not taken from a Secret") + " (only valueFrom.secretKeyRef)")
    for entry in _items(container.get("envFrom")):
        if "configMapRef" in _mapping(entry):
            problems.append(f"{what}: takes its environment from ConfigMap"
                            f" {_mapping(_mapping(entry)['configMapRef']).get('name')!r}, whose"
                            " values cannot be checked for credentials")
    return problems


def seat_problems(pod_spec: object, runtime_class: str | None = None) -> list[str]:
    """Every item of the seat's minimum sandbox the pod spec misses; [] when it has them all.
    `runtime_class`: the sandbox runtime the namespace requires (agentSandbox.runtimeClass)."""
    spec = _mapping(pod_spec)
    if not spec:
        return ["no pod spec"]
    problems = []
    if runtime_class is not None and spec.get("runtimeClassName") != runtime_class:
        problems.append(f"runtimeClassName is {spec.get('runtimeClassName')!r}, not"
                        f" {runtime_class!r}: the namespace's sandbox runtime (a second boundary"
                        " between the harness and the node's kernel)")
    if spec.get("automountServiceAccountToken") is not False:
        problems.append("automountServiceAccountToken is not false: the pod would hold a service"
                        " account token, a credential besides the key")
    for namespace in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(namespace) is True:
            problems.append(f"{namespace} is true: the seat shares the node's namespace")
    volume_problems, writable = _volume_problems(_items(spec.get("volumes")))
    problems += volume_problems
    pod_context = _mapping(spec.get("securityContext"))
    containers = [_mapping(c) for key in ("initContainers", "containers", "ephemeralContainers")
                  for c in _items(spec.get(key))]
    if not containers:
        problems.append("no container")
    for container in containers:
        problems += _container_problems(container, pod_context, writable)
    return problems


# Where each workload kind keeps its pod spec (pulumi-kubernetes' inputs), by the kind's last
# part: a Pod its own spec, a CronJob its job template's.
POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def pod_spec(kind: str, props: Mapping[str, Any]) -> Any:
    """The pod spec of a workload's props (kind: its last part, e.g. Deployment); None when the
    props hold none there."""
    node: Any = props
    for step in POD_SPEC_PATHS[kind]:
        node = node.get(step) if isinstance(node, Mapping) else None
    return node
