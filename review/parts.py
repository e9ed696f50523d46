"""A preview's steps as a reviewer reads them: one part per resource, with its change class, what
the change does and the old -> new lines, each from the kind's descriptor."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from review import kubernetes, registry
from review.kinds import (CLASSES, CONFIG_ONLY, HIDDEN_INPUTS, IN_PLACE, MODEL_REFETCH,
                          NO_CHANGE, REBUILD, RECHECK, RECONNECT, REPLACE, Change, changed_keys,
                          mapping_details)


@dataclass
class Part:
    """One resource of the preview, as the reviewer sees it."""
    name: str  # e.g. "server.conf"
    kind: str  # its type token
    resource: str  # the resource name in the stack, e.g. "inference-server-conf"
    change: str  # one of CLASSES
    meaning: str = ""
    details: list[str] = field(default_factory=list)
    gateway_line: str | None = None  # its line in the gateway section, if it has one


def inputs(step: Mapping[str, Any], which: str) -> dict[str, Any]:
    return dict((step.get(which) or {}).get("inputs") or {})


def kind_of(step: Mapping[str, Any]) -> str:
    """The step's resource type, from its URN (the part after the parent types)."""
    return step["urn"].split("::")[-2].rsplit("$", 1)[-1]


def part_name(step: Mapping[str, Any]) -> str:
    return registry.part_name(kind_of(step), inputs(step, "newState") or inputs(step, "oldState"))


def _part(step: Mapping[str, Any], stable_now: tuple[str, str, Any] | None) -> Part:
    kind = registry.kind(kind_of(step))
    old, new = inputs(step, "oldState"), inputs(step, "newState")
    change = kind.classify(step["op"], old, new)
    seen = Change(step["op"], change, old, new,
                  ((step.get("oldState") or {}).get("outputs") or {}), stable_now)
    details = kind.lines(seen)
    if step["op"] == "update" and old and new and changed_keys(old, new, kind.hidden) == ["reach"]:
        change, details = RECONNECT, mapping_details({"reach": old["reach"]}, {"reach": new["reach"]})
    if step.get("replaceReasons"):
        reasons = [r for r in step["replaceReasons"] if r not in HIDDEN_INPUTS]
        details.insert(0, f"replaced because {', '.join(reasons) or 'a hidden input'} changed")
    line = kind.gateway_line(seen) if kind.gateway_line and change != NO_CHANGE else None
    return Part(part_name(step), kind.type, step["urn"].rsplit("::", 1)[1], change,
                kind.meaning(change), details, line)


def parts(preview: Mapping[str, Any]) -> list[Part]:
    """The preview's resources, one per URN, most disruptive first, then by name.

    The root stack and component resources are left out: they hold nothing on a host.
    """
    by_urn: dict[str, Part] = {}
    steps = preview.get("steps") or []
    stable_now = kubernetes.stable_now([(kind_of(s), inputs(s, "newState")) for s in steps])
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
    restart = any(p.change not in (NO_CHANGE, RECONNECT) and registry.kind(p.kind).restarts
                  for p in all_parts)
    if changes <= {MODEL_REFETCH, CONFIG_ONLY, IN_PLACE, RECHECK, RECONNECT}:
        return (("restart, no rebuild" if restart else "in place, no restart")
                + (" (after a model re-fetch)" if MODEL_REFETCH in changes else ""))
    first = next(c for c in CLASSES if c in changes)
    return first + (" and restart" if restart and first in (REBUILD, REPLACE) else "")
