"""The policy pack on the real engine: a throwaway copy of the project (localhosts/engine.py) holding
one of the repository's stacks, previewed with the pack and the engine's event log.

`pulumi preview --json` leaves policy events out of its JSON; they are in the event log
(`--event-log`, which Project enables), one JSON object a line: `policyEvent` per violation,
`policyAnalyzeSummaryEvent` (per resource) and `policyAnalyzeStackSummaryEvent` naming the
policies that passed or failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from localhosts.engine import REPO, Project, Update

POLICIES = REPO / "policies"
REPO_STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))


@dataclass
class PackPreview(Update):
    """What the engine reported for a preview: its event log, and what `--json` printed."""
    preview: dict[str, Any] = field(default_factory=dict)

    def policies_run(self) -> set[str]:
        """Every policy the engine reports as evaluated (passed or failed) anywhere."""
        summaries = [e.get("policyAnalyzeSummaryEvent") or e.get("policyAnalyzeStackSummaryEvent")
                     for e in self.events]
        return {name for s in summaries if s for name in s.get("passed", []) + s.get("failed", [])}


def preview_with_pack(project: Project, stack: str, *extra: str) -> PackPreview:
    log = project.state / "preview-events.jsonl"
    log.unlink(missing_ok=True)
    result = project.pulumi("preview", "--stack", stack, "--json", "--policy-pack", str(POLICIES),
                            "--event-log", str(log), *extra, check=False)
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return PackPreview(result.returncode == 0, result.stdout + result.stderr, events,
                       json.loads(result.stdout))
