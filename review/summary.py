"""The Markdown summary of one stack's preview: the overall line, each part, the gateway's
lines, the policy pack's verdict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from review.kinds import NO_CHANGE
from review.parts import Part, overall, part_name, parts
from review.policies import policy_lines
from review.registry import kinds


def gateway_lines(all_parts: list[Part]) -> list[str]:
    """The gateway's upgrade, restarts, upstreams and keys, in the words of a reviewer: in the
    order spear/tokens.py names their kinds, then by text."""
    order = list(kinds())
    return [p.gateway_line for p in sorted(
        (p for p in all_parts if p.gateway_line),
        key=lambda p: (order.index(p.kind) if p.kind in order else len(order), p.gateway_line))]


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
    gateway = gateway_lines(all_parts)
    if gateway:
        lines += ["", "#### Gateway", "", *(f"- {line}" for line in gateway)]
    lines += ["", "#### Policies", ""]
    if policy_events is None:
        lines.append("Not run (no event log given).")
    else:
        names = {s["urn"]: f"{part_name(s)} (`{s['urn'].rsplit('::', 1)[1]}`)" for s in steps}
        lines += policy_lines(policy_events, names)
    for diagnostic in preview.get("diagnostics") or []:
        if diagnostic.get("severity") == "error":
            lines.append(f"- engine: {diagnostic['message'].strip()}")
    return "\n".join(lines) + "\n"
