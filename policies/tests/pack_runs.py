"""The policy pack on the real engine: a throwaway copy of the project (tests/engine.py) holding
one of the repository's stacks, previewed with the pack and the engine's event log.

`pulumi preview --json` leaves policy events out of its JSON; they are in the event log
(`--event-log`, which Project enables), one JSON object a line: `policyEvent` per violation,
`policyAnalyzeSummaryEvent` (per resource) and `policyAnalyzeStackSummaryEvent` naming the
policies that passed or failed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.engine import REPO, Project, Update, engine_env

POLICIES = REPO / "policies"
# The committed prod/dev placeholder secrets are encrypted with this passphrase (scripts/env.sh).
EXAMPLE_PASSPHRASE = "spear-fleet-example"
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


def repo_stack(workdir: Path, stack: str) -> Project:
    """A project copy holding stacks/Pulumi.<stack>.yaml as committed, the stack created.

    A stack that names an SSH key file gets a throwaway key instead, so the preview does not
    depend on this machine's hosts (preview needs the key's text, not a host).
    """
    project = Project(workdir, engine_env())
    project.env["PULUMI_CONFIG_PASSPHRASE"] = EXAMPLE_PASSPHRASE
    stack_file = REPO / "stacks" / f"Pulumi.{stack}.yaml"
    shutil.copy(stack_file, project.dir / "stacks")
    project.pulumi("stack", "init", stack)
    if "spear-fleet:sshPrivateKeyPath" in yaml.safe_load(stack_file.read_text())["config"]:
        key = workdir / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        project.set_config(stack, "sshPrivateKeyPath", str(key))
    return project


def preview_with_pack(project: Project, stack: str, *extra: str) -> PackPreview:
    log = project.state / "preview-events.jsonl"
    log.unlink(missing_ok=True)
    result = project.pulumi("preview", "--stack", stack, "--json", "--policy-pack", str(POLICIES),
                            "--event-log", str(log), *extra, check=False)
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return PackPreview(result.returncode == 0, result.stdout + result.stderr, events,
                       json.loads(result.stdout))
