"""An agent seat's Kubernetes objects as plain mappings, rendered from the typed config (pure).

The component (components/agent_seats/__init__.py) hands these to pulumi-kubernetes; the policy
pack reads the same shapes back from the preview (spear/seats.py::seat_problems), and tests
render them without Pulumi. Per seat: the Secret that holds the developer's virtual key (its
value is the component's to add: a Pulumi secret), a ConfigMap of the harness's wiring file when
it has one, and the Deployment of one pod that idles until the developer `kubectl exec`s the
harness in it.

The harness's wiring is spear/harness.py's, rendered with a placeholder for the key: every
variable that holds exactly the key comes from the Secret (`secretKeyRef`), and a longer value
that embeds it names that variable (`$(NAME)`, which Kubernetes expands), so the Deployment
holds no credential and is known at preview; a wiring that embeds the key anywhere else (a file,
a value with no such variable before it) is refused, since it could only reach the seat as a
literal.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.types import AgentSandbox, Gateway, NodeGuard, Seat
from components.agent_seats import node_guard
from spear import harness
from spear.rules import CODER_MODEL
from spear.seats import (DEVELOPER, DIALECT_CHECK, DIALECT_CHECK_PREFIX, HARNESS, HARNESS_VERSION,
                         HOME, KEY_ROTATION, NODE_GUARD, NODE_GUARD_APP, SEAT, SEAT_USER, TMP, WIRING_SHA256,
                         WORKSPACE, WORKSPACE_VOLUME)

KEY_PLACEHOLDER = "<the developer's virtual key>"  # rendered in the key's place, then taken out
KEY_FIELD = "key"  # the Secret's one entry
APP = "agent-seat"
WIRING_VOLUME = "wiring"
HARNESS_CONTAINER = "harness"
# The seat's pod idles: developers start the harness in it with `kubectl exec` (start_command),
# so it runs with the pod's environment, in the working copy, on a terminal of their own.
IDLE = ["sleep", "infinity"]
# sleep as PID 1 ignores SIGTERM: a replaced seat need not wait the default 30 s to be killed.
TERMINATION_GRACE_SECONDS = 5
# A dialect check: the harness in the seat image must say the version the stack pins (the image
# is pinned by digest, the version by `harnesses`: nothing else ties them), then one turn on the
# file spear/harness.py's TURN_PROMPT asks about. It fails on a version mismatch, the harness's
# exit status or an empty answer: its output, or the lines of it that hold an answer
# (harness.ANSWER_LINES: OpenHands exits 0 with none when the gateway refuses it).
CHECK_SCRIPT = (
    "version=$({program} --version) && case \"$version\" in *{version}*) ;; *) echo \"the seat"
    " image's {program} says $version; the stack pins {version}\" >&2; exit 1;; esac &&"
    " mkdir -p src && echo 'print(42)' > src/app.py && output=$({turn}) &&"
    " printf '%s\\n' \"$output\" && answer=$(printf '%s\\n' \"$output\"{select}) &&"
    " test -n \"$answer\"")
CHECK_DEADLINE_SECONDS = 600
# The gateway's root certificate, in one ConfigMap of the agent namespace, read-only in every
# seat: the harnesses are told to trust it (spear/harness.py CA_FILE_ENV).
CA_CONFIG_MAP = "gateway-ca"
CA_KEY = "gateway-ca.pem"
CA_FILE = f"/etc/spear-fleet/{CA_KEY}"
CA_VOLUME = "gateway-ca"
CA_SHA256 = "spear-fleet/gateway-ca-sha256"


# The node guard (node_guard.py): its objects, and what a seat reads to know it is guarded.
GUARD = NODE_GUARD_APP
GUARD_FILES = "/etc/spear-fleet/node-guard"
GUARD_PROGRAM, GUARD_CONFIG = "node_guard.py", "config.json"
GUARD_INTERVAL_SECONDS = 1
GUARD_CONFIG_SHA256 = "spear-fleet/node-guard-config-sha256"
POD_INFO = "/etc/spear-fleet/pod"  # the seat's downward API: its annotations
POD_INFO_VOLUME = "pod-info"
GUARDED_CONTAINER = "guarded"
# The first init container of every seat's pod: it waits until its node's guard has the pod's
# addresses in its table, which the guard says on the pod (NODE_GUARD). The kubelet refreshes the
# downward API file when the annotation changes.
GUARDED_SCRIPT = (
    'n=0; until grep -qxF "{annotation}=\\"$POD_IPS\\"" {pod_info}/annotations; do'
    ' [ $((n % 30)) -eq 0 ] && echo "waiting for the node guard to filter $POD_IPS";'
    ' n=$((n + 1)); sleep 1; done')


@dataclass(frozen=True)
class GatewayTrust:
    """How a seat reaches the gateway by its TLS name: the name, the address it resolves to in
    the seat (the sandbox has no DNS) and the root certificate the harness trusts."""
    name: str
    address: str
    root_pem: str

    @classmethod
    def of(cls, gateway: Gateway) -> GatewayTrust:
        """In the cluster, the Service's fixed cluster IP (gateway.kubernetes.tls, serviceIP); on
        a host, its TLS listener's address (gateway.listen.tls): the config check admits seats
        only with one of them."""
        cluster, listener = gateway.kubernetes, gateway.tls_listener
        if cluster is not None and cluster.tls is not None and cluster.service_ip is not None:
            return cls(cluster.tls.name, cluster.service_ip, cluster.tls.root_pem)
        if cluster is None and listener is not None:
            return cls(listener.tls.name, listener.address, listener.tls.root_pem)
        raise ValueError("seats need gateway.kubernetes.tls and serviceIP, or gateway.listen.tls")


def name(seat: Seat) -> str:
    return f"seat-{seat.name}"


def key_secret_name(seat: Seat) -> str:
    return f"seat-{seat.name}-key"


def wiring_name(seat: Seat) -> str:
    return f"seat-{seat.name}-wiring"


def labels(seat: Seat) -> dict[str, str]:
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/part-of": "spear-fleet",
            SEAT: seat.name, DEVELOPER: seat.developer, HARNESS: seat.harness}


def wiring(seat: Seat, gateway_url: str, versions: dict[str, str],
           window: harness.Window | None) -> dict[str, Any]:
    """The seat's harness wiring (spear/harness.py), the key a placeholder, the gateway's root
    where the seat has it."""
    return harness.wiring(gateway_url, KEY_PLACEHOLDER, CODER_MODEL, versions, window,
                          CA_FILE)[seat.harness]


def ca_config_map(sandbox: AgentSandbox, trust: GatewayTrust) -> dict[str, Any]:
    return {"metadata": {"name": CA_CONFIG_MAP, "namespace": sandbox.namespace,
                         "labels": {"app.kubernetes.io/part-of": "spear-fleet"}},
            "data": {CA_KEY: trust.root_pem}}


def _home_path(path: str) -> str:
    """A wiring file's path (`~/.codex/config.toml`) in the seat's HOME."""
    if not path.startswith("~/"):
        raise ValueError(f"a wiring file outside HOME: {path}")
    return posixpath.join(HOME, path[2:])


def _file(entry: dict[str, Any]) -> dict[str, str] | None:
    file = entry.get("file")
    if file is None:
        return None
    if KEY_PLACEHOLDER in file["content"]:
        raise ValueError(f"the {file['path']} wiring holds the key: it can only reach a seat as"
                         " an environment variable from its Secret")
    return {"key": posixpath.basename(file["path"]), "path": _home_path(file["path"]),
            "content": file["content"]}


def _env(seat: Seat, entry: dict[str, Any]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": "HOME", "value": HOME}, {"name": "TMPDIR", "value": TMP}]
    keyed = None  # the first variable that is exactly the key
    for variable, value in entry["env"].items():
        if value == KEY_PLACEHOLDER:
            env.append({"name": variable, "valueFrom": {"secretKeyRef": {
                "name": key_secret_name(seat), "key": KEY_FIELD}}})
            keyed = keyed or variable
        elif KEY_PLACEHOLDER in value:
            if keyed is None:
                raise ValueError(f"{variable} embeds the key and no variable before it is exactly"
                                 " the key: only such a variable can come from the seat's Secret")
            # Kubernetes expands $(NAME) of a variable defined earlier in the list (Claude
            # Code's `Authorization=Bearer <key>` header): the value names the key, never holds it.
            env.append({"name": variable, "value": value.replace(KEY_PLACEHOLDER, f"$({keyed})")})
        else:
            env.append({"name": variable, "value": value})
    return env


def key_secret(sandbox: AgentSandbox, seat: Seat) -> dict[str, Any]:
    """The Secret's metadata and type; its `stringData` ({KEY_FIELD: key}) is the component's."""
    return {"metadata": {"name": key_secret_name(seat), "namespace": sandbox.namespace,
                         "labels": labels(seat)},
            "type": "Opaque"}


def wiring_config_map(sandbox: AgentSandbox, seat: Seat, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The harness's wiring file (Codex's config.toml, Qwen-Code's settings.json); None for a
    harness wired by its environment alone."""
    file = _file(entry)
    if file is None:
        return None
    return {"metadata": {"name": wiring_name(seat), "namespace": sandbox.namespace,
                         "labels": labels(seat)},
            "data": {file["key"]: file["content"]}}


def container_security() -> dict[str, Any]:
    """What every container of the seat runs with (the cookbook's --cap-drop ALL and
    --security-opt no-new-privileges; the pod's context gives the user)."""
    return {"allowPrivilegeEscalation": False, "privileged": False,
            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def deployment(sandbox: AgentSandbox, seat: Seat, entry: dict[str, Any], trust: GatewayTrust,
               key_rotation: int = 0) -> dict[str, Any]:
    """The seat's Deployment: one pod, the seed's minimum sandbox (spear/seats.py). The working
    copy (an emptyDir of the seat's workspaceSize at /workspace) is its only writable mount and
    holds HOME; the wiring file and the gateway's root certificate are mounted read-only; the
    key comes from the Secret; the gateway's TLS name resolves to its Service's address."""
    if sandbox.seat_image is None:
        raise ValueError("seats need agentSandbox.seatImage")
    file = _file(entry)
    mounts: list[dict[str, Any]] = [
        {"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE},
        {"name": CA_VOLUME, "mountPath": CA_FILE, "subPath": CA_KEY, "readOnly": True}]
    volumes: list[dict[str, Any]] = [
        {"name": WORKSPACE_VOLUME, "emptyDir": {"sizeLimit": seat.workspace_size}},
        {"name": CA_VOLUME, "configMap": {"name": CA_CONFIG_MAP, "defaultMode": 0o444}}]
    # The folders the harness writes in HOME (its state beside its config) and TMPDIR, made by
    # the seat's user before the harness starts: the runtime would make a file mount's folder
    # as root, and the harness could not write beside its config.
    folders = sorted({HOME, TMP, *([posixpath.dirname(file["path"])] if file else [])})
    if file:
        mounts.append({"name": WIRING_VOLUME, "mountPath": file["path"], "subPath": file["key"],
                       "readOnly": True})
        volumes.append({"name": WIRING_VOLUME, "configMap": {"name": wiring_name(seat),
                                                             "defaultMode": 0o444}})
    if sandbox.node_guard is not None:
        volumes.append({"name": POD_INFO_VOLUME, "downwardAPI": {"items": [
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}})
    annotations = {HARNESS_VERSION: entry["version"], KEY_ROTATION: str(key_rotation),
                   WIRING_SHA256: hashlib.sha256((file["content"] if file else "").encode()).hexdigest(),
                   CA_SHA256: hashlib.sha256(trust.root_pem.encode()).hexdigest()}
    pod_labels = labels(seat)
    return {
        "metadata": {"name": name(seat), "namespace": sandbox.namespace, "labels": pod_labels,
                     "annotations": {HARNESS_VERSION: entry["version"]}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": APP, SEAT: seat.name}},
            # One pod per seat, never two beside each other on one working copy's name.
            "strategy": {"type": "Recreate"},
            "template": {
                # The version, the key's rotation, the wiring file's and the root's digests: a
                # change of any restarts the seat with it (a subPath mount never sees a
                # ConfigMap's update, and an environment variable is read at start).
                "metadata": {"labels": pod_labels, "annotations": annotations},
                "spec": {
                    **({"runtimeClassName": sandbox.runtime_class} if sandbox.runtime_class else {}),
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "hostNetwork": False, "hostPID": False, "hostIPC": False,
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                    "hostAliases": [{"ip": trust.address, "hostnames": [trust.name]}],
                    "securityContext": {"runAsUser": SEAT_USER, "runAsGroup": SEAT_USER,
                                        "runAsNonRoot": True, "fsGroup": SEAT_USER,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "initContainers": [*_guarded(sandbox), {
                        "name": "home",
                        "image": sandbox.seat_image,
                        "command": ["mkdir", "-p", *folders],
                        "securityContext": container_security(),
                        "volumeMounts": [{"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE}],
                    }],
                    "containers": [{
                        "name": HARNESS_CONTAINER,
                        "image": sandbox.seat_image,
                        "command": IDLE,
                        "workingDir": WORKSPACE,
                        "env": _env(seat, entry),
                        "securityContext": container_security(),
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    }


def _guarded(sandbox: AgentSandbox) -> list[dict[str, Any]]:
    """The init container that holds the seat until its node's guard filters it (none without
    a guard: the config check requires one with seats)."""
    if sandbox.node_guard is None:
        return []
    return [{"name": GUARDED_CONTAINER, "image": sandbox.seat_image,
             "command": ["sh", "-c", GUARDED_SCRIPT.format(annotation=NODE_GUARD, pod_info=POD_INFO)],
             "env": [{"name": "POD_IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}}],
             "securityContext": container_security(),
             "volumeMounts": [{"name": POD_INFO_VOLUME, "mountPath": POD_INFO, "readOnly": True}]}]


def guard_namespace(seats_namespace: str) -> str:
    """Its own namespace: no NetworkPolicy there may select it (on the node's network, a policy
    that did would put the node's address among the pods' the enforcer judges)."""
    return f"{seats_namespace}-{GUARD}"


def _guard_labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": GUARD, "app.kubernetes.io/part-of": "spear-fleet"}


def guard_config(sandbox: AgentSandbox, trust: GatewayTrust) -> dict[str, Any]:
    """What node_guard.py reads: the seats' namespace and where they may go (the gateway at the
    address its TLS name resolves to in a seat, and each mirror)."""
    assert sandbox.node_guard is not None and sandbox.gateway is not None
    allow = [{"cidr": f"{trust.address}/32", "ports": list(sandbox.gateway.ports)},
             *({"cidr": mirror.cidr, "ports": list(mirror.ports)} for mirror in sandbox.mirrors)]
    return {"namespace": sandbox.namespace, "allow": allow, "interval": GUARD_INTERVAL_SECONDS,
            "api_server": sandbox.node_guard.api_server}


def guard_objects(sandbox: AgentSandbox, trust: GatewayTrust) -> list[tuple[str, dict[str, Any]]]:
    """(kind, object) of the guard's namespace, account, its right to list and annotate the seats'
    pods, its program and settings, then its DaemonSet, in creation order."""
    guard: NodeGuard | None = sandbox.node_guard
    assert guard is not None
    namespace, labels = guard_namespace(sandbox.namespace), _guard_labels()
    files = {GUARD_PROGRAM: Path(node_guard.__file__).read_text(),
             GUARD_CONFIG: json.dumps(guard_config(sandbox, trust), indent=2, sort_keys=True)}
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    meta = {"name": GUARD, "namespace": namespace, "labels": labels}
    return [
        ("Namespace", {"metadata": {"name": namespace, "labels": labels}}),
        ("ServiceAccount", {"metadata": meta}),
        ("Role", {"metadata": {**meta, "namespace": sandbox.namespace},
                  "rules": [{"apiGroups": [""], "resources": ["pods"],
                             "verbs": ["list", "patch"]}]}),
        ("RoleBinding", {"metadata": {**meta, "namespace": sandbox.namespace},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                     "name": GUARD},
                         "subjects": [{"kind": "ServiceAccount", "name": GUARD,
                                       "namespace": namespace}]}),
        ("ConfigMap", {"metadata": meta, "data": files}),
        ("DaemonSet", {"metadata": meta, "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {GUARD_CONFIG_SHA256: digest}},
                "spec": {
                    "serviceAccountName": GUARD, "hostNetwork": True,
                    "dnsPolicy": "ClusterFirstWithHostNet",
                    "tolerations": [{"operator": "Exists"}],  # every node seats may run on
                    # Time to see the node's seats gone before it removes its table.
                    "terminationGracePeriodSeconds": node_guard.LEAVE_SECONDS + 10,
                    "containers": [{
                        "name": GUARD, "image": guard.image,
                        "command": ["python3", f"{GUARD_FILES}/{GUARD_PROGRAM}",
                                    f"{GUARD_FILES}/{GUARD_CONFIG}"],
                        "env": [{"name": "NODE_NAME",
                                 "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                        # Root with NET_ADMIN alone: it writes the node's nftables, nothing else.
                        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False,
                                            "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}},
                        # Ready once its table is on the node: the seats wait for the DaemonSet.
                        "readinessProbe": {"exec": {"command": ["nft", "list", "table", "inet",
                                                                node_guard.TABLE]},
                                           "periodSeconds": 2},
                        "resources": {"requests": {"cpu": "10m", "memory": "30Mi"}},
                        "volumeMounts": [{"name": "files", "mountPath": GUARD_FILES,
                                          "readOnly": True}]}],
                    "volumes": [{"name": "files", "configMap": {"name": GUARD}}]}}}}),
    ]


def dialect_check(sandbox: AgentSandbox, harness_name: str) -> Seat:
    """The seat a harness's dialect check runs as: the check developer's, named
    seat-dialect-<harness> (declared seats may not take the prefix: the config check)."""
    if sandbox.dialect_check_developer is None:
        raise ValueError("seats need agentSandbox.dialectCheckDeveloper")
    return Seat(name=f"{DIALECT_CHECK_PREFIX}{harness_name}", developer=sandbox.dialect_check_developer,
                harness=harness_name, workspace_size="1Gi")


def dialect_check_job(sandbox: AgentSandbox, check: Seat, entry: dict[str, Any],
                      trust: GatewayTrust) -> dict[str, Any]:
    """The Job that checks the seat image's harness is the pinned version, then runs one real
    turn of it as a seat would (the same pod, the same sandbox), through the gateway with the
    check developer's key. Its pod template carries the version and the wiring's digest, so a
    bump or a new wiring replaces the Job: the check runs again, and pulumi-kubernetes waits for
    it to complete (a failed turn fails the `up`)."""
    template = deployment(sandbox, check, entry, trust)["spec"]["template"]
    template["metadata"]["labels"] = {**template["metadata"]["labels"], DIALECT_CHECK: check.harness}
    spec = template["spec"]
    spec["restartPolicy"] = "Never"
    [container] = spec["containers"]
    turn = harness.ONE_TURN[check.harness]
    answer_lines = harness.ANSWER_LINES.get(check.harness)
    select = f" | grep -E -e {shlex.quote(answer_lines)}" if answer_lines else ""
    # A failed check's last lines become its termination message, which the `up`'s error shows.
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    container["command"] = ["sh", "-c", CHECK_SCRIPT.format(
        program=shlex.quote(turn[0]), version=shlex.quote(entry["version"]), turn=shlex.join(turn),
        select=select)]
    return {"metadata": {"name": name(check), "namespace": sandbox.namespace,
                         "labels": template["metadata"]["labels"],
                         "annotations": {HARNESS_VERSION: entry["version"]}},
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": CHECK_DEADLINE_SECONDS,
                     "template": template}}


def start_command(sandbox: AgentSandbox, seat: Seat, entry: dict[str, Any]) -> str:
    """What a developer runs to start the seat's harness."""
    return (f"kubectl -n {sandbox.namespace} exec -it deploy/{name(seat)}"
            f" -c {HARNESS_CONTAINER} -- {entry['run']}")
