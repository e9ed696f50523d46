"""scripts/gate's command line (gate/run.py::main, gate/stack.py): it reads the stack's
rolloutGate with the config check's parser and refuses, touching nothing, a stack whose gate it
cannot run. The run itself is tests/integration/test_rollout_gate.py's and, through the
spear-fleet gateway, tests/integration/test_vllm_fleet_on_kubernetes.py's."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gate import run as gate_run
from gate.stack import GateStack
from tests.support import gate_records as records


@pytest.fixture()
def pulumi_says(tmp_path, monkeypatch):
    """A `pulumi` on PATH that answers `config --json` with the given vllmFleet."""
    monkeypatch.chdir(records.project(tmp_path))

    def install(fleet):
        answer = json.dumps({"spear-fleet:vllmFleet": {"objectValue": fleet}})
        script = tmp_path / "bin" / "pulumi"
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{answer}\nEOF\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return install


def test_a_stack_without_the_gates_keys_is_refused_naming_them(pulumi_says, capsys):
    pulumi_says({"rolloutGate": records.gate_config()})
    assert gate_run.main(["--stack", "prod"]) == 2
    assert "vllmFleet.rolloutGate.keys must name the stable and the canary track's developers" \
        in capsys.readouterr().err
    assert not os.path.exists(records.RECORDS)  # nothing written


def test_a_bad_gate_policy_is_refused_with_every_problem(pulumi_says, capsys):
    pulumi_says({"rolloutGate": records.gate_config(toolCallSamples=5, concurrency=0)})
    assert gate_run.main(["--stack", "prod"]) == 2
    err = capsys.readouterr().err
    assert "vllmFleet.rolloutGate.policy.toolCallSamples: got 5" in err
    assert "vllmFleet.rolloutGate.policy.concurrency: got 0" in err


def test_without_pulumi_on_path_it_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gate_run.main(["--stack", "prod"]) == 2
    assert "pulumi is not on PATH: run `source scripts/env.sh` first" in capsys.readouterr().err


def test_a_stack_without_a_gate_is_refused_naming_what_is_missing(pulumi_says, capsys):
    pulumi_says({"stable": {"tag": "v0.24.0"}})
    assert gate_run.main(["--stack", "prod"]) == 2
    err = capsys.readouterr().err
    assert "spear-fleet:vllmFleet.rolloutGate.policy: got nothing; allowed: an object with keys alpha," in err
    assert "spear-fleet:vllmFleet.rolloutGate.records: got nothing; allowed: the records folder" in err


def test_the_candidates_pin_holds_the_harness_versions_the_stack_pins():
    stack = GateStack(policy=None, records=Path("records"), tasks=(), arrivals=(),
                      canary={"tag": "v0.25.0", "model": "m", "revision": "r"}, gateway_url="",
                      keys={}, key_owners={}, installed_version="1.91.1",
                      harness_versions={"qwen-code": "0.24.4", "codex": "0.169.0"})
    pin = stack.candidate_pin(None)
    assert pin.harness_versions == (("codex", "0.169.0"), ("qwen-code", "0.24.4"))
    assert pin.gateway_version == "1.91.1"
