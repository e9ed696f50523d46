"""The pack through the real engine: every committed stack passes it, and a deliberately broken
stack fails with each rule's violation named in the engine's event log."""

from __future__ import annotations

import pytest

from policies.pack import RULES as PACK_RULES
from localhosts.engine import REPO, repo_stack
from tests.support.pack_runs import REPO_STACKS, preview_with_pack


ALL_RULES = {rule.POLICY.name for rule in PACK_RULES}

# The fleet program with the config's pin and port checks bypassed (as if they had regressed),
# so values it refuses reach the resources: the pack is the second line.
UNCHECKED_PROGRAM = '''
import dataclasses

import config.load

_load = config.load.load


def unchecked(host):
    shards = (dataclasses.replace(host.model.shards[0], sha256="TODO"), *host.model.shards[1:])
    return dataclasses.replace(
        host,
        llama_cpp=dataclasses.replace(
            host.llama_cpp, source=dataclasses.replace(host.llama_cpp.source, commit="master")),
        model=dataclasses.replace(host.model, shards=shards),
        server=dataclasses.replace(host.server, port=22),  # sshd's port on reds.internal
    )


def unchecked_fleet(fleet):
    # An unpinned engine and revision, promoted over another previous pair with no gate record.
    return dataclasses.replace(fleet, stable=dataclasses.replace(fleet.stable, tag="latest", revision="main"),
                               previous=dataclasses.replace(fleet.stable, tag="v0.23.0"))


def load():
    stack = _load()
    hosts = {name: unchecked(host) for name, host in stack.config.inference_hosts.items()}
    return dataclasses.replace(
        stack, config=dataclasses.replace(stack.config, inference_hosts=hosts,
                                          vllm_fleet=unchecked_fleet(stack.config.vllm_fleet)))


config.load.load = load
import fleet  # noqa: E402,F401  (the real program, on that config)
'''

# The prod and local stacks declare the vLLM fleet: their previews need the kubernetes plugin, and
# the local stack's, a cluster at the kubeconfig file it names.
pytestmark = pytest.mark.kubernetes

# rule -> (enforcement level, resource the violation is reported on, part of its message)
EXPECTED = {
    "llama-source-pinned": ("mandatory", "reds-llama-server", "pinned to 'master'"),
    "model-shards-hashed": ("mandatory", "reds-model", "(got 'TODO')"),
    "context-size-explicit": ("mandatory", "reds-server-conf", "without --ctx-size"),
    "yarn-matches-context": ("mandatory", "reds-server-conf", "override is missing"),
    "jinja-enabled": ("mandatory", "reds-server-conf", "--jinja is required"),
    "server-loopback-only": ("mandatory", "reds-server-conf", "listens on 0.0.0.0"),
    "inference-system-unit": ("mandatory", "reds-unit", "Slice=user.slice"),
    "ports-distinct": ("mandatory", "spear-fleet-prod", "port 22 on reds.internal"),
    "kv-cache-and-slots": ("advisory", "reds-server-conf", "--parallel 4, not 1"),
    "k8s-image-pinned": ("mandatory", "vllm-stable", "'vllm/vllm-openai:latest' is tagged :latest"),
    "vllm-revision-pinned": ("mandatory", "vllm-stable", "at revision 'main'"),
    "k8s-promotion-gate": ("mandatory", "vllm-stable", "no gate record pins exactly latest"),
}


def edit(path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize("stack", REPO_STACKS)
def test_every_committed_stack_passes_the_pack(stack, tmp_path, request):
    # The local stack's fleet names the local cluster's kubeconfig file, which a clean machine
    # has not written (the provider would then take the path for a kubeconfig's text, find the
    # cluster unreachable and preview from the inputs alone): it previews on the session's cluster.
    cluster = request.getfixturevalue("kube_cluster").kubeconfig if stack == "local" else None
    run = preview_with_pack(repo_stack(tmp_path, stack, cluster), stack)
    assert run.ok, run.output[-4000:]
    assert run.policy_violations() == []
    assert run.policies_run() == ALL_RULES


def test_a_broken_stack_fails_with_each_violation_named(tmp_path):
    project = repo_stack(tmp_path, "prod")
    # What the config checker accepts and the pack refuses.
    project.set_config("prod", "inferenceHosts.reds.server.host", "0.0.0.0")
    project.set_config("prod", "inferenceHosts.reds.server.parallel", 4)
    # A launcher and a unit that regressed (the copy's hosts/ files).
    serve = project.dir / "hosts" / "inference" / "serve.sh"
    edit(serve, "args+=(--jinja)\n", "")
    edit(serve, 'args=(--model "$model" --ctx-size "$ctx")', 'args=(--model "$model")')
    edit(serve, '    args+=(--override-kv "$SPEAR_SERVER_ARCH.context_length=int:$ctx")\n', "")
    edit(project.dir / "hosts" / "inference" / "spear-inference.service",
         "Slice=system.slice", "Slice=user.slice")
    (project.dir / "fleet.py").write_text((REPO / "__main__.py").read_text())
    (project.dir / "__main__.py").write_text(UNCHECKED_PROGRAM)

    run = preview_with_pack(project, "prod")

    assert not run.ok
    # The program ran: the preview failed on policy, not on config.
    assert any(step["urn"].endswith("::reds-server-conf") for step in run.preview["steps"])
    by_rule = {}
    for violation in run.policy_violations():
        by_rule.setdefault(violation["policyName"], []).append(violation)
    assert set(by_rule) == set(EXPECTED)
    for rule, (level, resource, fragment) in EXPECTED.items():
        assert any(v["enforcementLevel"] == level and v["policyPackName"] == "spear-fleet"
                   and v["resourceUrn"].endswith("::" + resource) and fragment in v["message"]
                   for v in by_rule[rule]), (rule, by_rule[rule])
