"""A short Markdown summary of `pulumi preview --json` for a reviewer, followed by the policy results.

CLI: `python -m scripts.preview_summary [PREVIEW_JSON] [--policy-events EVENT_LOG]` (the preview
from stdin when no file is given) prints the summary.

It reads only what the engine reported: each step's op, replaceReasons and the inputs of its
old and new state (the JSON carries no diffReasons or detailedDiff for these dynamic
resources, so the changed keys are found by comparing the two), plus the policy events of the
engine's event log (`pulumi preview --event-log FILE`; `--json` leaves them out). Every part is
classified as exactly one of CLASSES; run the preview with `--show-sames` to have unchanged
parts listed too. Secrets are never shown: the `connection` input (and the serialized
provider) are skipped whatever their value, and so are the gateway's master key and developer keys:
a key change is named ("ana: budget 25 -> 40 USD / 30d (in place)"), its value never shown.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from spear import fleet, tokens, vllm
from spear.rules import IMAGE

CONFIG_ONLY = "config only (restart)"
# An update that restarts nothing by itself: a key, a record, a check run again.
IN_PLACE = "in place (no restart)"
REBUILD = "rebuild"
MODEL_REFETCH = "model re-fetch"
REPLACE = "replace"
DELETE = "delete"
CREATE = "create"
NO_CHANGE = "no change"
# The RunPod endpoint's own: a new pod, a pod reset through the API, vLLM restarted on its pod.
RECREATE_POD = "recreate pod"
RESET_POD = "reset pod"
RESTART_VLLM = "restart vLLM"
# The REDS endpoint's own: its server is checked again, nothing on its host changes.
RECHECK = "re-check"
# The vLLM fleet's Deployments: a new pod template rolls out; a new replica count only scales.
ROLLING_UPDATE = "rolling update"
SCALE = "scale"
# Any host resource: only the way in (the login, the SSH host key the host must present) changed.
RECONNECT = "new way in"
# Most disruptive first: the order of the overall line and of the list.
CLASSES = (DELETE, RECREATE_POD, REPLACE, REBUILD, CREATE, ROLLING_UPDATE, RESET_POD, MODEL_REFETCH,
           RESTART_VLLM, SCALE, CONFIG_ONLY, IN_PLACE, RECHECK, RECONNECT, NO_CHANGE)
# What a replacement or an update (the generic class) of these types is.
KIND_CLASSES = {
    (tokens.RUNPOD_POD.type, REPLACE): RECREATE_POD,
    (tokens.RUNPOD_POD.type, CONFIG_ONLY): RESET_POD,
    (tokens.POD_VLLM.type, CONFIG_ONLY): RESTART_VLLM,
    (tokens.REDS_TUNNEL_CHECK.type, CONFIG_ONLY): RECHECK,
    **{(kind.type, CONFIG_ONLY): IN_PLACE for kind in (
        tokens.GATEWAY_KEY, tokens.GATEWAY_MIGRATIONS, tokens.GATEWAY_BACKUP, tokens.HOST_KEY,
        tokens.SMOKE_TEST, tokens.ENDPOINT_VERIFICATION, tokens.GATEWAY_SMOKE_TEST,
        tokens.FLEET_THROUGHPUT)},
}

# Never shown, whatever they hold (the SSH key, the pickled provider that may embed config, the
# gateway's master key, a developer's virtual key, cluster credentials, a Kubernetes Secret's
# contents).
HIDDEN_INPUTS = frozenset({"connection", "cluster", "__provider", "master_key", "key", "kubeconfig",
                           "stringData"})
HIDDEN_BY_KIND = {tokens.K8S_SECRET.type: frozenset({"data"})}
# Systemd units: named by their unit, restarted by their triggers.
UNIT_KINDS = (tokens.SYSTEMD_UNIT.type, tokens.GATEWAY_SERVICE.type, tokens.GATEWAY_TUNNEL.type)
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's "known after the update"

PART_NAMES = {
    tokens.LLAMA_SERVER_BUILD.type: "llama-server build",
    tokens.MODEL_FILES.type: "model files",
    tokens.SERVER_CONF.type: "server.conf",
    tokens.LAUNCHER.type: "serve.sh",
    tokens.SMOKE_TEST.type: "smoke test",
    tokens.RUNPOD_POD.type: "RunPod pod",
    tokens.POD_VLLM.type: "vLLM on the pod",
    tokens.ENDPOINT_VERIFICATION.type: "endpoint verification",
    tokens.HOST_KEY.type: "SSH host key",
    tokens.REDS_TUNNEL_CHECK.type: "REDS tunnel check",
    tokens.LITELLM_INSTALL.type: "LiteLLM install",
    tokens.GATEWAY_DATABASE.type: "gateway PostgreSQL",
    tokens.GATEWAY_MIGRATIONS.type: "gateway migrations",
    tokens.GATEWAY_BACKUP.type: "gateway database backups",
    tokens.GATEWAY_CONFIG.type: "gateway config.yaml",
    tokens.GATEWAY_ENV.type: "gateway env file",
    tokens.GATEWAY_HOOK_FILE.type: "gateway hook file",
    tokens.TUNNEL_KEY.type: "tunnel key",
    tokens.TUNNEL_KNOWN_HOSTS.type: "tunnel known_hosts",
    tokens.GATEWAY_SMOKE_TEST.type: "gateway smoke test",
    tokens.FLEET_THROUGHPUT.type: "fleet throughput",
    tokens.GATEWAY_KEY.type: "developer key",
    tokens.GATEWAY_ROLLOUT.type: "gateway rollout",
    tokens.K8S_JOB.type: "Job",
    tokens.K8S_PROVIDER: "Kubernetes provider",
    tokens.K8S_NAMESPACE.type: "namespace",
    tokens.K8S_SECRET.type: "vLLM API key Secret",
    tokens.K8S_CONFIG_MAP.type: "ConfigMap",
    tokens.K8S_PVC.type: "model cache claim",
    tokens.K8S_PV.type: "model cache volume",
    tokens.K8S_SERVICE.type: "vLLM Service",
    tokens.K8S_NETWORK_POLICY.type: "NetworkPolicy",
}

# What an in-place update of each kind does on the host.
UPDATE_MEANING = {
    tokens.MODEL_FILES.type: "re-verifies every shard (size, sha256) and fetches the ones the host lacks;"
                   " removes shards no longer listed",
    tokens.SERVER_CONF.type: "rewrites server.conf; nothing is rebuilt",
    tokens.LAUNCHER.type: "rewrites serve.sh; nothing is rebuilt",
    tokens.SYSTEMD_UNIT.type: "daemon-reload and restart, then waits for /health and checks the unit is"
                    " in its slice",
    tokens.SMOKE_TEST.type: "asks the server for SPEAR-BACKEND-OK again",
    tokens.HOST_KEY.type: "checks the host against the newly pinned key (ssh.hostKey)",
    tokens.ENDPOINT_VERIFICATION.type: "re-verifies the endpoint: model list, completion, tool call",
    tokens.REDS_TUNNEL_CHECK.type: "re-checks the tunnel: nothing is installed on a REDS host",
    tokens.GATEWAY_CONFIG.type: "rewrites config.yaml; the proxy restarts, nothing is reinstalled",
    tokens.GATEWAY_ENV.type: "rewrites the env file (secrets, not shown); the proxy restarts",
    tokens.GATEWAY_MIGRATIONS.type: "applies only the LiteLLM migrations not yet recorded",
    tokens.GATEWAY_BACKUP.type: "rewrites the backup timer and script; the dumps are kept",
    tokens.GATEWAY_KEY.type: "updated in place through /key/update: the developer keeps the key",
    tokens.GATEWAY_SMOKE_TEST.type: "asks coder for SPEAR-BACKEND-OK through the gateway again",
    tokens.FLEET_THROUGHPUT.type: "measures the track's prefill and decode tokens/s again and"
                                  " compares them with the last measurement",
    tokens.GATEWAY_ROLLOUT.type: "waits until every gateway pod proved its fleet routes and is"
                                 " ready; a failed proof fails the update, the old pods serve on",
}
# Kinds whose create or delete is not what OP_MEANING says of the others.
KIND_MEANING = {
    (tokens.LITELLM_INSTALL.type, REPLACE): "a new virtualenv with the pinned LiteLLM (the previous"
                                            " one stays for a rollback); then the new migrations"
                                            " and a restart",
    (tokens.GATEWAY_KEY.type, CREATE): "a new virtual key (/key/generate)",
    (tokens.GATEWAY_DATABASE.type, CREATE): "a PostgreSQL cluster, role and database; with"
                                            " gateway.database.restoreFrom the dump is loaded"
                                            " into it first (keys and spend as dumped)",
    (tokens.GATEWAY_BACKUP.type, CREATE): "a timer that dumps the database into the backup"
                                          " folder; one dump is taken at once",
    (tokens.GATEWAY_BACKUP.type, DELETE): "the timer is removed; the dumps stay in the folder",
    (tokens.GATEWAY_KEY.type, DELETE): "the key is deleted (/key/delete): its developer loses"
                                       " access",
    (tokens.GATEWAY_KEY.type, REPLACE): "a new virtual key: the old one is deleted",
    (tokens.HOST_KEY.type, CREATE): "trusts the SSH host key the host presents now (trust on"
                                    " first use) unless ssh.hostKey pins one; every later"
                                    " connection to the host refuses any other key",
    (tokens.HOST_KEY.type, REPLACE): "another host: the key it presents is trusted on first use"
                                     " again (pin ssh.hostKey to check it instead)",
    (tokens.REDS_TUNNEL_CHECK.type, CREATE): "opens the tunnel and checks that something answers:"
                                             " nothing is installed on a REDS host",
    (tokens.REDS_TUNNEL_CHECK.type, DELETE): "forgotten: nothing was installed on the REDS host,"
                                             " so nothing is removed",
}
OP_MEANING = {
    REBUILD: "builds llama-server from the new source on the host and points `current` at it"
             " (the previous build stays on the host)",
    REPLACE: "made anew on the host",
    CREATE: "new on the host",
    DELETE: "removed from the host",
    RECREATE_POD: "a new pod is made through the RunPod API (the API cannot change this in place;"
                  " the weights are downloaded again) and vLLM started on it; the old pod is deleted",
    RESET_POD: "updated through the RunPod API, which resets the pod: it restarts on a new SSH port"
               " and vLLM is started there again",
    RESTART_VLLM: "rewrites vLLM's command line (and key file) on the pod and restarts it in tmux;"
                  " the pod is kept",
    ROLLING_UPDATE: "Kubernetes rolls the pods over to the new template one at a time (one extra"
                    " pod, none unavailable); `up` waits until the rollout is Available",
    SCALE: "pods are added or removed; the running ones keep their template",
    RECONNECT: "records how to reach the host from now on (refresh and destroy use it); nothing"
               " is sent to the host",
}


@dataclass
class Part:
    """One resource of the preview, as the reviewer sees it."""
    name: str  # e.g. "server.conf"
    kind: str  # its type token
    resource: str  # the resource name in the stack, e.g. "inference-server-conf"
    change: str  # one of CLASSES
    meaning: str = ""
    details: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Steps -> parts


def _inputs(step: Mapping[str, Any], which: str) -> dict[str, Any]:
    return dict((step.get(which) or {}).get("inputs") or {})


def _kind(step: Mapping[str, Any]) -> str:
    """The step's resource type, from its URN (the part after the parent types)."""
    return step["urn"].split("::")[-2].rsplit("$", 1)[-1]


# The gateway's own Kubernetes objects (gateway.kubernetes), by kind.
GATEWAY_APP = ("app.kubernetes.io/name", "spear-gateway")  # components/gateway/cluster_manifests.py
GATEWAY_PART_NAMES = {
    tokens.K8S_NAMESPACE.type: "gateway namespace",
    tokens.K8S_SECRET.type: "gateway credentials Secret",
    tokens.K8S_CONFIG_MAP.type: "gateway ConfigMap",
    tokens.K8S_DEPLOYMENT.type: "gateway Deployment",
    tokens.K8S_SERVICE.type: "gateway Service",
    tokens.K8S_JOB.type: "gateway migrations Job",
}


def _part_name(step: Mapping[str, Any]) -> str:
    kind = _kind(step)
    inputs = _inputs(step, "newState") or _inputs(step, "oldState")
    labels = (inputs.get("metadata") or {}).get("labels") or {}
    if labels.get(fleet.PART) == fleet.MONITORING:  # components/vllm_fleet/monitoring.py
        return f"Prometheus {kind.rsplit(':', 1)[-1]} {inputs['metadata'].get('name', '')}".rstrip()
    if labels.get(GATEWAY_APP[0], "").startswith(GATEWAY_APP[1]) and kind in GATEWAY_PART_NAMES:
        return f"{GATEWAY_PART_NAMES[kind]} {inputs['metadata'].get('name', '')}".rstrip()
    if kind in UNIT_KINDS:
        return (_inputs(step, "newState") or _inputs(step, "oldState")).get("unit", "systemd unit")
    if kind == tokens.STACK:
        return "the stack"
    if kind == tokens.K8S_DEPLOYMENT.type:
        return f"vLLM {_track(step) or 'Deployment'} Deployment"
    if kind == tokens.K8S_CONFIG_MAP.type:
        inputs = _inputs(step, "newState") or _inputs(step, "oldState")
        part = ((inputs.get("metadata") or {}).get("labels") or {}).get(fleet.PART)
        return f"{part} ConfigMap" if part else "ConfigMap"
    return PART_NAMES.get(kind, kind)


# ---------------------------------------------------------------------------------------------
# The vLLM fleet's Deployments: which track, and the (image tag, revision) pair each serves.


def _track(step: Mapping[str, Any]) -> str | None:
    inputs = _inputs(step, "newState") or _inputs(step, "oldState")
    return ((inputs.get("metadata") or {}).get("labels") or {}).get(fleet.TRACK)


def _serving(inputs: Mapping[str, Any]) -> tuple[str, str, Any] | None:
    """(image tag, revision, replicas) of a fleet Deployment's inputs; None for other shapes."""
    try:
        [container] = inputs["spec"]["template"]["spec"]["containers"]
        match = IMAGE.fullmatch(container["image"])
        revision = vllm.flags(container["command"]).get(vllm.REVISION_FLAG, "?")
        return ((match["tag"] or match["digest"] or "?") if match else container["image"],
                revision, inputs["spec"].get("replicas"))
    except (KeyError, TypeError, ValueError):
        return None


def _stable_now(steps: list[Mapping[str, Any]]) -> tuple[str, str, Any] | None:
    """The stable pair after the update, which a new canary is compared with: from the stable
    Deployment's step, or (a preview without --show-sames leaves an unchanged one out) from the
    rollout record, which changes whenever a canary comes or goes."""
    for step in steps:
        if _kind(step) == tokens.K8S_DEPLOYMENT.type and _track(step) == fleet.STABLE \
                and _inputs(step, "newState"):
            return _serving(_inputs(step, "newState"))
    for step in steps:
        inputs = _inputs(step, "newState")
        labels = (inputs.get("metadata") or {}).get("labels") or {}
        if _kind(step) == tokens.K8S_CONFIG_MAP.type and labels.get(fleet.PART) == fleet.ROLLOUT:
            try:
                pair = json.loads(inputs["data"][fleet.STABLE_JSON])
                return (pair["tag"], pair["revision"], None)
            except (KeyError, TypeError, ValueError):
                return None
    return None


def _pair_line(track: str, old: tuple[str, str, Any], new: tuple[str, str, Any]) -> str:
    return (f"{track}: {old[0]} -> {new[0]}, revision {old[1][:7]} -> {new[1][:7]}"
            if (old[0], old[1]) != (new[0], new[1]) else "")


def _fleet_details(step: Mapping[str, Any], change: str,
                   stable_now: tuple[str, str, Any] | None) -> list[str]:
    """The reviewer's lines for a fleet Deployment: the pair it moves, its replicas; a new canary
    against the stable pair it tests."""
    track = _track(step) or "Deployment"
    old, new = _serving(_inputs(step, "oldState")), _serving(_inputs(step, "newState"))
    lines = []
    if old and new:
        lines = [line for line in (_pair_line(track, old, new),) if line]
        if old[2] != new[2]:
            lines.append(f"replicas: {_count(old[2])} -> {_count(new[2])}")
    elif new and change == CREATE:
        if track == fleet.CANARY and stable_now:
            lines.append(_pair_line(track, stable_now, new) or f"{track}: the stable pair")
        lines.append(f"{track}: {new[0]}, revision {new[1][:7]}, {_count(new[2])} replica(s)")
    elif old and change == DELETE:
        lines.append(f"{track} removed: {old[0]}, revision {old[1][:7]}")
    return lines


def _count(value: Any) -> str:
    return str(int(value)) if isinstance(value, (int, float)) else str(value)


def _show(value: Any) -> str:
    if value == UNKNOWN:
        return "(known after the update)"
    if value is None:
        return "(unset)"
    return f"`{value}`"


def _changed_keys(old: Mapping[str, Any], new: Mapping[str, Any], kind: str = "") -> list[str]:
    hidden = HIDDEN_INPUTS | HIDDEN_BY_KIND.get(kind, frozenset())
    return sorted(k for k in set(old) | set(new) if k not in hidden and old.get(k) != new.get(k))


def _mapping_details(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return [f"`{k}`: {_show(old.get(k))} → {_show(new.get(k))}" for k in _changed_keys(old, new)]


def _details(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The old → new lines a reviewer needs for one kind of resource."""
    if kind == tokens.SERVER_CONF.type:
        lines = _mapping_details(old.get("settings") or {}, new.get("settings") or {})
        return lines or (["content changed"] if old.get("content") != new.get("content") else [])
    if kind == tokens.LLAMA_SERVER_BUILD.type:
        lines = _mapping_details(old.get("source") or {}, new.get("source") or {})
        old_flags, new_flags = old.get("cmake_flags") or [], new.get("cmake_flags") or []
        lines += [f"cmake flag removed: `{f}`" for f in old_flags if f not in new_flags]
        lines += [f"cmake flag added: `{f}`" for f in new_flags if f not in old_flags]
        # The script's text is too long to show; that it changed explains the new key.
        if old.get("build_script") != new.get("build_script"):
            lines.append("build-llama-server.sh changed")
        return lines + _mapping_details({"build key": old.get("build_key")},
                                        {"build key": new.get("build_key")})
    if kind == tokens.MODEL_FILES.type:
        old_shards = {s["name"]: s for s in old.get("shards") or []}
        new_shards = {s["name"]: s for s in new.get("shards") or []}
        lines = [f"shard removed: `{n}`" for n in old_shards if n not in new_shards]
        lines += [f"shard added: `{n}`" for n in new_shards if n not in old_shards]
        return lines + [f"shard `{n}`: new {', '.join(_changed_keys(old_shards[n], s))}"
                        for n, s in new_shards.items()
                        if n in old_shards and _changed_keys(old_shards[n], s)]
    if kind == tokens.GATEWAY_KEY.type:
        return [key_change(old, new)]
    if kind == tokens.GATEWAY_CONFIG.type:
        return _config_yaml_details(old, new)
    if kind == tokens.LITELLM_INSTALL.type and old.get("version") != new.get("version"):
        return [f"LiteLLM {old.get('version')} -> {new.get('version')}"]
    if kind in UNIT_KINDS:
        triggers = _changed_keys(old.get("restart_triggers") or {}, new.get("restart_triggers") or {})
        lines = [f"restarts: {', '.join(triggers)} changed"] if triggers else []
        return lines + [f"`{k}` changed" for k in _changed_keys(old, new) if k != "restart_triggers"]
    if kind == tokens.POD_VLLM.type:
        lines = _mapping_details(vllm.flags(old.get("command_line") or []),
                                 vllm.flags(new.get("command_line") or []))
        if old.get("endpoint") != new.get("endpoint"):
            lines.append("the pod's SSH endpoint changed (a restarted pod): vLLM is started there")
        return lines + [f"`{k}` changed" for k in _changed_keys(old, new)
                        if k not in ("command_line", "endpoint", "pod_started_at")]
    if kind == tokens.SMOKE_TEST.type and _changed_keys(old.get("triggers") or {}, new.get("triggers") or {}):
        return ["runs again: what it checks restarts or is checked again"]
    return [f"`{k}` changed" for k in _changed_keys(old, new, kind)]


def _usd(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else _show(value)


def key_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """What an in-place update of a developer's key changes, for a reviewer; never the key."""
    developer = new.get("developer") or old.get("developer")
    changes = []
    (old_max, old_window), (new_max, new_window) = (
        (s.get("max_budget"), s.get("budget_duration")) for s in (old, new))
    if old_window != new_window:
        changes.append(f"budget {_usd(old_max)} USD / {old_window} -> {_usd(new_max)} USD /"
                       f" {new_window} (the new window starts unspent)")
    elif old_max != new_max:
        changes.append(f"budget {_usd(old_max)} -> {_usd(new_max)} USD / {new_window}")
    if old.get("models") != new.get("models"):
        changes.append(f"models {', '.join(old.get('models') or [])} -> "
                       f"{', '.join(new.get('models') or [])}")
    changes += [f"{limit} {_usd(old.get(limit))} -> {_usd(new.get(limit))}"
                for limit in ("tpm_limit", "rpm_limit", "max_parallel_requests")
                if old.get(limit) != new.get(limit)]
    if old.get("metadata") != new.get("metadata"):
        changes.append("metadata changed")
    if old.get("rotation") != new.get("rotation"):
        changes.append(f"key rotated (the old one works for {new.get('rotation_grace')})")
    return f"{developer}: {'; '.join(changes) or 'refreshed'} (in place)"


def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {k: v for key, item in value.items()
                for k, v in _flatten(item, f"{path}.{key}" if path else str(key)).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _flatten(item, f"{path}[{i}]").items()}
    return {path: value}


def _config_yaml_details(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The settings config.yaml changes (it holds no secret: credentials are os.environ/<NAME>)."""
    if old.get("content") == new.get("content"):
        return [f"`{k}` changed" for k in _changed_keys(old, new) if k != "content"]
    if UNKNOWN in (old.get("content"), new.get("content")):
        return ["config.yaml changed (known after the update)"]
    before, after = (_flatten(yaml.safe_load(s.get("content") or "") or {}) for s in (old, new))
    return _mapping_details(before, after) or ["config.yaml changed"]


def _classify(op: str, kind: str) -> str:
    if op in ("same", "read", "refresh"):
        return NO_CHANGE
    if op in ("create", "import"):
        return CREATE
    if op in ("delete", "discard", "read-discard"):
        return DELETE
    if op == "update":
        return MODEL_REFETCH if kind == tokens.MODEL_FILES.type else CONFIG_ONLY
    # replace, create-replacement, delete-replaced, read-replacement: the resource is made anew;
    # a new build of llama-server is a rebuild (a new pin or new flags, see replaceReasons).
    return REBUILD if kind == tokens.LLAMA_SERVER_BUILD.type else REPLACE


def _part(step: Mapping[str, Any], stable_now: tuple[str, str, Any] | None = None) -> Part:
    kind = _kind(step)
    change = _classify(step["op"], kind)
    change = KIND_CLASSES.get((kind, change), change)
    old, new = _inputs(step, "oldState"), _inputs(step, "newState")
    details = _details(kind, old, new) if old and new else []
    if step["op"] == "update" and old and new and _changed_keys(old, new, kind) == ["reach"]:
        change, details = RECONNECT, _mapping_details({"reach": old["reach"]}, {"reach": new["reach"]})
    if kind == tokens.K8S_DEPLOYMENT.type:
        if change == CONFIG_ONLY:
            # Only the replica count: a scale; anything in the pod template: a rolling update.
            template_changed = (old.get("spec") or {}).get("template") != (new.get("spec") or {}).get("template")
            change = ROLLING_UPDATE if template_changed else SCALE
        if _track(step):  # a fleet track (the gateway's Deployment has none)
            details = _fleet_details(step, change, stable_now) or details
    problem = ((step.get("oldState") or {}).get("outputs") or {}).get("problem")
    if kind == tokens.REDS_TUNNEL_CHECK.type and problem:
        details.insert(0, f"refresh found: {problem}")
    if step.get("replaceReasons"):
        reasons = [r for r in step["replaceReasons"] if r not in HIDDEN_INPUTS]
        details.insert(0, f"replaced because {', '.join(reasons) or 'a hidden input'} changed")
    meaning = KIND_MEANING.get((kind, change)) or (
        UPDATE_MEANING.get(kind, "updated in place; nothing is rebuilt")
        if change in (CONFIG_ONLY, IN_PLACE, MODEL_REFETCH, RECHECK) else OP_MEANING.get(change, ""))
    return Part(_part_name(step), kind, step["urn"].rsplit("::", 1)[1], change, meaning, details)


def parts(preview: Mapping[str, Any]) -> list[Part]:
    """The preview's resources, one per URN, most disruptive first, then by name.

    The root stack and component resources are left out: they hold nothing on a host.
    """
    by_urn: dict[str, Part] = {}
    steps = preview.get("steps") or []
    stable_now = _stable_now(steps)
    for step in steps:
        state = step.get("newState") or step.get("oldState") or {}
        if not state.get("custom"):
            continue
        part = _part(step, stable_now)
        # A replacement may come as several steps (create-replacement, delete-replaced).
        if step["urn"] not in by_urn or by_urn[step["urn"]].change == NO_CHANGE:
            by_urn[step["urn"]] = part
    return sorted(by_urn.values(), key=lambda p: (CLASSES.index(p.change), p.resource))


def overall(all_parts: list[Part]) -> str:
    """One line: what the whole change means for the server."""
    changes = {p.change for p in all_parts} - {NO_CHANGE}
    if not changes:
        return "no changes"
    restart = any(p.change not in (NO_CHANGE, RECONNECT) and p.kind in UNIT_KINDS
                  for p in all_parts)
    if changes <= {MODEL_REFETCH, CONFIG_ONLY, IN_PLACE, RECHECK, RECONNECT}:
        return (("restart, no rebuild" if restart else "in place, no restart")
                + (" (after a model re-fetch)" if MODEL_REFETCH in changes else ""))
    first = next(c for c in CLASSES if c in changes)
    return first + (" and restart" if restart and first in (REBUILD, REPLACE) else "")


# ---------------------------------------------------------------------------------------------
# Policy events -> results


def _policy_lines(policy_events: list[Mapping[str, Any]], names: Mapping[str, str]) -> list[str]:
    violations = [e["policyEvent"] for e in policy_events if "policyEvent" in e]
    summaries = [e.get("policyAnalyzeSummaryEvent") or e.get("policyAnalyzeStackSummaryEvent")
                 for e in policy_events]
    summaries = [s for s in summaries if s]
    if not summaries and not violations:
        return ["No policy pack ran."]
    packs = sorted({f"{s['policyPackName']} {s['policyPackVersion']}" for s in summaries + violations})
    failed = {v["policyName"] for v in violations} | {n for s in summaries for n in s.get("failed", [])}
    passed = sorted({n for s in summaries for n in s.get("passed", [])} - failed)
    mandatory = [v for v in violations if v["enforcementLevel"] == "mandatory"]
    verdict = (f"**FAILED**: {len(mandatory)} mandatory violation(s)" if mandatory
               else "**passed**")
    lines = [f"Policy pack {', '.join(packs)}: {verdict}; {len(violations) - len(mandatory)}"
             f" advisory; {len(passed)} rule(s) passed everywhere"
             + (f" ({', '.join(f'`{n}`' for n in passed)})." if passed else ".")]
    for v in sorted(violations, key=lambda v: (v["enforcementLevel"] != "mandatory", v["policyName"])):
        # The engine's message is the policy's description, then the rule's own message.
        message = v["message"].strip().split("\n", 1)[-1].replace("\n", " ")
        where = names.get(v.get("resourceUrn", ""), v.get("resourceUrn", "").rsplit("::", 1)[-1])
        lines.append(f"- {'❌' if v['enforcementLevel'] == 'mandatory' else '⚠️'}"
                     f" `{v['policyName']}` ({v['enforcementLevel']}) on {where}: {message}")
    return lines


# ---------------------------------------------------------------------------------------------
# The gateway: what a reviewer needs in one line each


def _endpoint(unit: Any) -> str:
    return str(unit).removeprefix("spear-tunnel-").removesuffix(".service")


def gateway_lines(preview: Mapping[str, Any]) -> list[str]:
    """The gateway's upgrade, restarts, upstreams and keys, in the words of a reviewer."""
    ops: dict[str, Mapping[str, Any]] = {}
    for step in preview.get("steps") or []:
        state = step.get("newState") or step.get("oldState") or {}
        if state.get("custom") and (step["urn"] not in ops or ops[step["urn"]]["op"] == "same"):
            ops[step["urn"]] = step
    install, config, upstreams, keys = [], [], [], []
    for step in ops.values():
        kind, change = _kind(step), _classify(step["op"], _kind(step))
        old, new = _inputs(step, "oldState"), _inputs(step, "newState")
        if change == NO_CHANGE:
            continue
        if kind == tokens.LITELLM_INSTALL.type and change == REPLACE:
            what = (f"LiteLLM {old.get('version')} -> {new.get('version')}"
                    if old.get("version") != new.get("version")
                    else "LiteLLM reinstalled (its install recipe changed)")
            install.append(f"gateway: {what} (reinstall, migrate, restart)")
        elif kind == tokens.GATEWAY_CONFIG.type and change == CONFIG_ONLY \
                and old.get("content") != new.get("content"):
            settings = [d.split("`")[1] for d in _config_yaml_details(old, new) if "`" in d]
            config.append("gateway: config.yaml changed" + (f" ({', '.join(settings)})" if settings
                                                             else "") + ": restart only")
        elif kind == tokens.GATEWAY_TUNNEL.type and change in (CREATE, DELETE):
            unit = (new or old).get("unit")
            upstreams.append(f"gateway: new upstream {_endpoint(unit)} ({unit}; the proxy restarts)"
                             if change == CREATE else
                             f"gateway: upstream {_endpoint(unit)} removed ({unit} stops)")
        elif kind == tokens.GATEWAY_KEY.type:
            developer = (new or old).get("developer")
            keys.append({CREATE: f"{developer}: new key", DELETE: f"{developer}: key revoked",
                         REPLACE: f"{developer}: new key (the old one is deleted)"}.get(
                             change) or key_change(old, new))
    return install + config + upstreams + sorted(keys)


# ---------------------------------------------------------------------------------------------
# The summary


def summarize(preview: Mapping[str, Any], policy_events: list[Mapping[str, Any]] | None) -> str:
    """The Markdown summary of one stack's preview; policy_events None: the pack did not run."""
    steps = preview.get("steps") or []
    stack = steps[0]["urn"].split("::")[0].split(":")[-1] if steps else "stack"
    all_parts = parts(preview)
    lines = [f"### `{stack}`: {overall(all_parts)}", ""]
    counts = preview.get("changeSummary") or {}
    if counts:
        lines += ["Engine: " + ", ".join(f"{n} {op}" for op, n in sorted(counts.items())) + ".", ""]
    unchanged = [f"{p.name} (`{p.resource}`)" for p in all_parts if p.change == NO_CHANGE]
    for p in all_parts:
        if p.change == NO_CHANGE:
            continue
        lines.append(f"- **{p.name}** (`{p.resource}`): **{p.change}**: {p.meaning}.")
        lines += [f"  - {d}" for d in p.details]
    if unchanged:
        lines.append(f"- No change: {', '.join(unchanged)}.")
    gateway = gateway_lines(preview)
    if gateway:
        lines += ["", "#### Gateway", "", *(f"- {line}" for line in gateway)]
    lines += ["", "#### Policies", ""]
    if policy_events is None:
        lines.append("Not run (no event log given).")
    else:
        names = {s["urn"]: f"{_part_name(s)} (`{s['urn'].rsplit('::', 1)[1]}`)" for s in steps}
        lines += _policy_lines(policy_events, names)
    for diagnostic in preview.get("diagnostics") or []:
        if diagnostic.get("severity") == "error":
            lines.append(f"- engine: {diagnostic['message'].strip()}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("preview", nargs="?", help="`pulumi preview --json` output (default: stdin)")
    parser.add_argument("--policy-events", help="the preview's `--event-log` file (JSON lines)")
    args = parser.parse_args(argv)
    with open(args.preview) if args.preview else sys.stdin as handle:
        preview = json.load(handle)
    events = None
    if args.policy_events:
        with open(args.policy_events) as handle:
            events = [json.loads(line) for line in handle if line.strip()]
    sys.stdout.write(summarize(preview, events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
