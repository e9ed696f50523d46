"""The policy pack's events of a preview (`--event-log`) as the reviewer's verdict and lines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def policy_lines(policy_events: list[Mapping[str, Any]], names: Mapping[str, str]) -> list[str]:
    """The verdict line, then one line per violation, mandatory first; `names` shows a URN."""
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
