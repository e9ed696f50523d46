"""The pack through the real engine: every committed stack passes it, and a deliberately broken
stack fails with each rule's violation named in the engine's event log."""

from __future__ import annotations

import pytest

from pack_runs import REPO_STACKS, preview_with_pack
from tests.engine import REPO, repo_stack

pytestmark = pytest.mark.integration

ALL_RULES = {"llama-source-pinned", "model-shards-hashed", "context-size-explicit",
             "yarn-matches-context", "jinja-enabled", "server-loopback-only",
             "inference-system-unit", "ports-distinct", "kv-cache-and-slots"}

# The fleet program with stack_config's pin checks bypassed (as if they had regressed), so
# values it refuses reach the resources: the pack is the second line.
UNCHECKED_PINS_PROGRAM = '''
import dataclasses

import stack_config

_load = stack_config.load


def load():
    config = _load()
    shards = (dataclasses.replace(config.model.shards[0], sha256="TODO"), *config.model.shards[1:])
    return dataclasses.replace(
        config,
        llama_cpp=dataclasses.replace(
            config.llama_cpp, source=dataclasses.replace(config.llama_cpp.source, commit="master")),
        model=dataclasses.replace(config.model, shards=shards),
    )


stack_config.load = load
import fleet  # noqa: E402,F401  (the real program, on that config)
'''

# rule -> (enforcement level, resource the violation is reported on, part of its message)
EXPECTED = {
    "llama-source-pinned": ("mandatory", "inference-llama-server", "pinned to 'master'"),
    "model-shards-hashed": ("mandatory", "inference-model", "(got 'TODO')"),
    "context-size-explicit": ("mandatory", "inference-server-conf", "without --ctx-size"),
    "yarn-matches-context": ("mandatory", "inference-server-conf", "override is missing"),
    "jinja-enabled": ("mandatory", "inference-server-conf", "--jinja is required"),
    "server-loopback-only": ("mandatory", "inference-server-conf", "listens on 0.0.0.0"),
    "inference-system-unit": ("mandatory", "inference-unit", "Slice=user.slice"),
    "ports-distinct": ("mandatory", "spear-fleet-prod", "port 22 on reds.internal"),
    "kv-cache-and-slots": ("advisory", "inference-server-conf", "--parallel 4, not 1"),
}


def edit(path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize("stack", REPO_STACKS)
def test_every_committed_stack_passes_the_pack(stack, tmp_path):
    run = preview_with_pack(repo_stack(tmp_path, stack), stack)
    assert run.ok, run.output[-4000:]
    assert run.policy_violations() == []
    assert run.policies_run() == ALL_RULES


def test_a_broken_stack_fails_with_each_violation_named(tmp_path):
    project = repo_stack(tmp_path, "prod")
    # What stack_config accepts and the pack refuses.
    project.set_config("prod", "server.host", "0.0.0.0")
    project.set_config("prod", "server.port", 22)  # sshd's port on reds.internal
    project.set_config("prod", "server.parallel", 4)
    # A launcher and a unit that regressed (the copy's hosts/ files).
    serve = project.dir / "hosts" / "inference" / "serve.sh"
    edit(serve, "args+=(--jinja)\n", "")
    edit(serve, 'args=(--model "$model" --ctx-size "$ctx")', 'args=(--model "$model")')
    edit(serve, '    args+=(--override-kv "$SPEAR_SERVER_ARCH.context_length=int:$ctx")\n', "")
    edit(project.dir / "hosts" / "inference" / "spear-inference.service",
         "Slice=system.slice", "Slice=user.slice")
    (project.dir / "fleet.py").write_text((REPO / "__main__.py").read_text())
    (project.dir / "__main__.py").write_text(UNCHECKED_PINS_PROGRAM)

    run = preview_with_pack(project, "prod")

    assert not run.ok
    assert run.preview["steps"], "the program ran: the preview failed on policy, not on config"
    by_rule = {}
    for violation in run.policy_violations():
        by_rule.setdefault(violation["policyName"], []).append(violation)
    assert set(by_rule) == set(EXPECTED)
    for rule, (level, resource, fragment) in EXPECTED.items():
        assert any(v["enforcementLevel"] == level and v["policyPackName"] == "spear-fleet"
                   and v["resourceUrn"].endswith("::" + resource) and fragment in v["message"]
                   for v in by_rule[rule]), (rule, by_rule[rule])
