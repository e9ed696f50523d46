"""The Kubernetes objects the fleet, the gateway and the agent seats render. Their kinds are
pulumi-kubernetes', not classes of ours, so they are described here: named by the labels their
families set, a Deployment's update a rolling update or a scale, a fleet track's Deployment by
the pair it moves, a seat's by its harness version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from review.kinds import (CONFIG_ONLY, CREATE, DELETE, REPLACE, ROLLING_UPDATE, SCALE, Change, Kind,
                          changed_lines, count)
from spear import fleet, seats, tokens, vllm
from spear.rules import APP_LABEL, GATEWAY_APP, IMAGE

# The gateway's own objects (gateway.kubernetes), by kind.
GATEWAY_PART_NAMES = {
    tokens.K8S_NAMESPACE.type: "gateway namespace",
    tokens.K8S_SECRET.type: "gateway credentials Secret",
    tokens.K8S_CONFIG_MAP.type: "gateway ConfigMap",
    tokens.K8S_DEPLOYMENT.type: "gateway Deployment",
    tokens.K8S_SERVICE.type: "gateway Service",
    tokens.K8S_JOB.type: "gateway Job",  # its migrations, a restore from a backup
    tokens.K8S_CRON_JOB.type: "gateway database backup CronJob",
}


# An agent seat's objects (components/agent_seats), by kind; a harness's dialect check is a Job.
SEAT_PART_NAMES = {
    tokens.K8S_SECRET.type: "key Secret",
    tokens.K8S_CONFIG_MAP.type: "wiring ConfigMap",
    tokens.K8S_DEPLOYMENT.type: "Deployment",
    tokens.K8S_JOB.type: "Job",
}


def labels(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
    return (inputs.get("metadata") or {}).get("labels") or {}


def labelled_name(kind: str, inputs: Mapping[str, Any]) -> str | None:
    """The name of an object its family labels as its own (whatever its kind), else None."""
    found = labels(inputs)
    if found.get(fleet.PART) == fleet.MONITORING:  # components/vllm_fleet/monitoring.py
        return f"Prometheus {kind.rsplit(':', 1)[-1]} {inputs['metadata'].get('name', '')}".rstrip()
    if found.get(APP_LABEL, "").startswith(GATEWAY_APP) and kind in GATEWAY_PART_NAMES:
        return f"{GATEWAY_PART_NAMES[kind]} {inputs['metadata'].get('name', '')}".rstrip()
    if found.get(APP_LABEL) == seats.NODE_GUARD_APP:
        return f"node guard {kind.rsplit(':', 1)[-1]}"
    seat = found.get(seats.SEAT)
    if seat and seat.startswith(seats.DIALECT_CHECK_PREFIX) and kind in SEAT_PART_NAMES:
        return f"{found.get(seats.HARNESS)} dialect check {SEAT_PART_NAMES[kind]}"
    if seat and kind in SEAT_PART_NAMES:
        return f"agent seat {seat} {SEAT_PART_NAMES[kind]}"
    return None


def track(inputs: Mapping[str, Any]) -> str | None:
    return labels(inputs).get(fleet.TRACK)


def serving(inputs: Mapping[str, Any]) -> tuple[str, str, Any] | None:
    """(image tag, revision, replicas) of a fleet Deployment's inputs; None for other shapes."""
    try:
        [container] = inputs["spec"]["template"]["spec"]["containers"]
        match = IMAGE.fullmatch(container["image"])
        revision = vllm.flags(container["command"]).get(vllm.REVISION_FLAG, "?")
        return ((match["tag"] or match["digest"] or "?") if match else container["image"],
                revision, inputs["spec"].get("replicas"))
    except (KeyError, TypeError, ValueError):
        return None


def stable_now(steps: list[tuple[str, Mapping[str, Any]]]) -> tuple[str, str, Any] | None:
    """The stable pair after the update, which a new canary is compared with, from the steps'
    (kind, new inputs): from the stable Deployment, or (a preview without --show-sames leaves an
    unchanged one out) from the rollout record, which changes whenever a canary comes or goes."""
    for kind, inputs in steps:
        if kind == tokens.K8S_DEPLOYMENT.type and track(inputs) == fleet.STABLE and inputs:
            return serving(inputs)
    for kind, inputs in steps:
        if kind == tokens.K8S_CONFIG_MAP.type and labels(inputs).get(fleet.PART) == fleet.ROLLOUT:
            try:
                pair = json.loads(inputs["data"][fleet.STABLE_JSON])
                return (pair["tag"], pair["revision"], None)
            except (KeyError, TypeError, ValueError):
                return None
    return None


def _pair_line(name: str, old: tuple[str, str, Any], new: tuple[str, str, Any]) -> str:
    return (f"{name}: {old[0]} -> {new[0]}, revision {old[1][:7]} -> {new[1][:7]}"
            if (old[0], old[1]) != (new[0], new[1]) else "")


def _fleet_details(change: Change) -> list[str]:
    """The reviewer's lines for a fleet Deployment: the pair it moves, its replicas; a new canary
    against the stable pair it tests."""
    name = track(change.inputs) or "Deployment"
    old, new = serving(change.old), serving(change.new)
    lines = []
    if old and new:
        lines = [line for line in (_pair_line(name, old, new),) if line]
        if old[2] != new[2]:
            lines.append(f"replicas: {count(old[2])} -> {count(new[2])}")
    elif new and change.change == CREATE:
        if name == fleet.CANARY and change.stable_now:
            lines.append(_pair_line(name, change.stable_now, new) or f"{name}: the stable pair")
        lines.append(f"{name}: {new[0]}, revision {new[1][:7]}, {count(new[2])} replica(s)")
    elif old and change.change == DELETE:
        lines.append(f"{name} removed: {old[0]}, revision {old[1][:7]}")
    return lines


def _seat(inputs: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(harness, its version, image) of a seat Deployment's inputs; None for other shapes."""
    try:
        template = inputs["spec"]["template"]
        [container] = template["spec"]["containers"]
        return (labels(inputs)[seats.HARNESS],
                template["metadata"]["annotations"][seats.HARNESS_VERSION], container["image"])
    except (KeyError, TypeError, ValueError):
        return None


def _pin_lines(old: tuple[str, str, str], new: tuple[str, str, str]) -> list[str]:
    """A seat's or a dialect check's harness version and image, old -> new, where they moved."""
    lines = [f"{new[0]}: {old[1]} -> {new[1]}"] if old[:2] != new[:2] else []
    return lines + ([f"image: {old[2]} -> {new[2]}"] if old[2] != new[2] else [])


def _seat_details(change: Change) -> list[str]:
    """A seat's harness version and image, old -> new; on create, whose seat it is."""
    old, new = _seat(change.old), _seat(change.new)
    if old and new:
        lines = _pin_lines(old, new)
        if _deployment_update(change.old, change.new) == ROLLING_UPDATE:
            # A seat's strategy is Recreate: its one pod goes, with its emptyDir.
            lines.append("the seat's pod is made anew: its working copy (/workspace) starts empty")
        return lines
    if new and change.change == CREATE:
        return [f"{new[0]} {new[1]} for {labels(change.new).get(seats.DEVELOPER)}, {new[2]}"]
    return []


def _deployment_details(change: Change) -> list[str]:
    fleet_lines = _fleet_details(change) if track(change.inputs) else []
    seat_lines = _seat_details(change) if labels(change.inputs).get(seats.SEAT) else []
    return fleet_lines or seat_lines or (
        changed_lines(change.old, change.new) if change.old and change.new else [])


def _job_details(change: Change) -> list[str]:
    """A dialect check's harness version and image, old -> new, and that it runs again."""
    if not labels(change.inputs).get(seats.DIALECT_CHECK):
        return changed_lines(change.old, change.new) if change.old and change.new else []
    old, new = _seat(change.old), _seat(change.new)
    lines = _pin_lines(old, new) if old and new else []
    if new and change.change in (CREATE, REPLACE):
        lines.append(f"one real {new[0]} {new[1]} turn through the gateway, before its seats move")
    return lines


def _deployment_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    # Only the replica count: a scale; anything in the pod template: a rolling update.
    template_changed = (old.get("spec") or {}).get("template") != (new.get("spec") or {}).get("template")
    return ROLLING_UPDATE if template_changed else SCALE


def _config_map_name(inputs: Mapping[str, Any]) -> str:
    part = labels(inputs).get(fleet.PART)
    return f"{part} ConfigMap" if part else "ConfigMap"


def _stable_tuple(inputs: Mapping[str, Any]) -> dict[str, str] | None:
    """The tuple a rollout record says the stable pair serves with: member -> value (its engine
    and revision, LiteLLM's version, the tool registry's digest, each harness's version); None
    for other shapes."""
    try:
        pair = json.loads(inputs["data"][fleet.STABLE_JSON])
        served = json.loads(inputs["data"].get(fleet.SERVED_WITH_JSON) or "null") or {}
        members = {"engine": pair["tag"], "revision": pair["revision"][:7]}
    except (KeyError, TypeError, ValueError):
        return None
    if served.get("gatewayVersion"):
        members["LiteLLM"] = served["gatewayVersion"]
    if served.get("toolRegistry"):
        members["tool registry"] = served["toolRegistry"][:12]
    return {**members, **(served.get("harnessVersions") or {})}


def _config_map_details(change: Change) -> list[str]:
    """For the fleet's rollout record, the members of the stable tuple that move, old -> new,
    beside the inputs that changed."""
    if not (change.old and change.new):
        return []
    lines = changed_lines(change.old, change.new)
    old, new = _stable_tuple(change.old), _stable_tuple(change.new)
    if labels(change.inputs).get(fleet.PART) != fleet.ROLLOUT or not (old and new):
        return lines
    moved = [f"{member} {old.get(member, 'none')} -> {new.get(member, 'none')}"
             for member in dict.fromkeys([*old, *new]) if old.get(member) != new.get(member)]
    return ([f"the stable tuple: {'; '.join(moved)}"] if moved else []) + lines


KINDS = (
    Kind(tokens.K8S_PROVIDER, "Kubernetes provider", CONFIG_ONLY),
    Kind.of(tokens.K8S_NAMESPACE, "namespace", CONFIG_ONLY),
    Kind.of(tokens.K8S_SECRET, "vLLM API key Secret", CONFIG_ONLY, hidden=frozenset({"data"})),
    Kind.of(tokens.K8S_CONFIG_MAP, _config_map_name, CONFIG_ONLY, details=_config_map_details),
    Kind.of(tokens.K8S_PVC, "model cache claim", CONFIG_ONLY),
    Kind.of(tokens.K8S_PV, "model cache volume", CONFIG_ONLY),
    Kind.of(tokens.K8S_SERVICE, "vLLM Service", CONFIG_ONLY),
    Kind.of(tokens.K8S_DEPLOYMENT, lambda inputs: f"vLLM {track(inputs) or 'Deployment'} Deployment",
            _deployment_update, details=_deployment_details),
    Kind.of(tokens.K8S_JOB, "Job", CONFIG_ONLY, details=_job_details),
    Kind.of(tokens.K8S_NETWORK_POLICY, "NetworkPolicy", CONFIG_ONLY),
    # The node guard's (components/agent_seats/node_guard.py): its program and settings change
    # with its ConfigMap, which restarts the DaemonSet's pods; the table stays on the node.
    Kind.of(tokens.K8S_DAEMON_SET, "DaemonSet", ROLLING_UPDATE),
    # The in-cluster gateway's backups: a change is used from the next run on.
    Kind.of(tokens.K8S_CRON_JOB, "CronJob", CONFIG_ONLY),
    Kind.of(tokens.K8S_SERVICE_ACCOUNT, "ServiceAccount", CONFIG_ONLY),
    Kind.of(tokens.K8S_ROLE, "Role", CONFIG_ONLY),
    Kind.of(tokens.K8S_ROLE_BINDING, "RoleBinding", CONFIG_ONLY),
)
