"""The preview summary names the vLLM fleet's changes: a stable bump as a rolling update with the
pair old -> new, a new canary against the stable pair it tests, a replica change as a scale; the
API key Secret and the kubeconfig are never shown; an agent seat by its harness version, its key
never shown. Steps are shaped like the engine's, with the fleet's own manifests as their inputs
(tests/integration has the same on real previews)."""

from __future__ import annotations

import json
from typing import Any

from components.agent_seats import manifests as seat_manifests
from components.vllm_fleet import manifests
from config.load import parse_stack
from spear import tokens
from spear.fleet import CANARY, PART, ROLLOUT, SERVED_WITH_JSON, STABLE, STABLE_JSON
from review.kinds import ROLLING_UPDATE, SCALE
from review.summary import summarize
from tests.support.config_cases import CANARY_PAIR, SEATS_GATEWAY_URL, fleet_raw, seats_raw

KUBECONFIG = "apiVersion: v1\nclusters: [{cluster: {server: https://k8s.internal}}]\n"


def urn(kind: str, name: str) -> str:
    return f"urn:pulumi:prod::spear-fleet::{tokens.VLLM_FLEET}${kind}::{name}"


def step(op: str, kind: str, name: str, old: dict | None, new: dict | None) -> dict[str, Any]:
    def state(inputs):
        return None if inputs is None else {"custom": True, "type": kind, "inputs": inputs}
    return {"op": op, "urn": urn(kind, name), "oldState": state(old), "newState": state(new)}


def deployment(track: str = STABLE, **fleet: Any) -> dict[str, Any]:
    cfg = parse_stack(fleet_raw(**fleet)).vllm_fleet
    pair, replicas = ((cfg.canary.pair, cfg.canary.replicas) if track == CANARY
                      else (cfg.stable, cfg.replicas))
    return manifests.deployment(cfg, track, pair, replicas)


DEPLOYMENT = tokens.K8S_DEPLOYMENT.type


def test_a_stable_bump_is_a_rolling_update_naming_the_pair_old_to_new():
    text = summarize({"steps": [step("update", DEPLOYMENT, "vllm-stable", deployment(),
                                     deployment(stable=CANARY_PAIR))]}, None)
    assert text.startswith(f"### `prod`: {ROLLING_UPDATE}\n")
    assert f"- **vLLM stable Deployment** (`vllm-stable`): **{ROLLING_UPDATE}**: Kubernetes rolls" in text
    assert "  - stable: v0.24.0 -> v0.25.0, revision da6e2ed -> 1234567\n" in text


def test_a_new_canary_is_named_against_the_stable_pair_it_tests():
    canary = deployment(CANARY, canary={**CANARY_PAIR, "replicas": 1})
    text = summarize({"steps": [step("same", DEPLOYMENT, "vllm-stable", deployment(), deployment()),
                                step("create", DEPLOYMENT, "vllm-canary", None, canary)]}, None)
    assert text.startswith("### `prod`: create\n")
    assert "  - canary: v0.24.0 -> v0.25.0, revision da6e2ed -> 1234567\n" in text
    assert "  - canary: v0.25.0, revision 1234567, 1 replica(s)\n" in text
    assert "No change: vLLM stable Deployment (`vllm-stable`)" in text


def test_a_replica_change_only_scales():
    text = summarize({"steps": [step("update", DEPLOYMENT, "vllm-stable", deployment(),
                                     deployment(replicas=3))]}, None)
    assert text.startswith(f"### `prod`: {SCALE}\n")
    assert "  - replicas: 2 -> 3\n" in text and "revision" not in text


def test_a_removed_canary_says_which_pair_left():
    canary = deployment(CANARY, canary={**CANARY_PAIR, "replicas": 1})
    text = summarize({"steps": [step("delete", DEPLOYMENT, "vllm-canary", canary, None)]}, None)
    assert "  - canary removed: v0.25.0, revision 1234567\n" in text


def test_the_api_key_and_the_kubeconfig_are_never_shown():
    secret_old = {"metadata": {"name": "vllm-api-key"}, "stringData": {"VLLM_API_KEY": "sk-old-key"},
                  "data": {"VLLM_API_KEY": "c2stb2xkLWtleQ=="}}
    secret_new = {"metadata": {"name": "vllm-api-key"}, "stringData": {"VLLM_API_KEY": "sk-new-key"},
                  "data": {"VLLM_API_KEY": "c2stbmV3LWtleQ=="}}
    text = summarize({"steps": [
        step("update", tokens.K8S_SECRET.type, "vllm-api-key", secret_old, secret_new),
        step("update", tokens.K8S_PROVIDER, "vllm-cluster", {"kubeconfig": KUBECONFIG},
             {"kubeconfig": KUBECONFIG + "# rotated\n"})]}, None)
    for shown in ("sk-old-key", "sk-new-key", "c2st", "k8s.internal", "kubeconfig`"):
        assert shown not in text
    assert "**vLLM API key Secret** (`vllm-api-key`)" in text


def test_without_the_unchanged_stable_step_the_canary_is_compared_with_the_rollout_records_pair():
    cfg = parse_stack(fleet_raw(canary={**CANARY_PAIR, "replicas": 1})).vllm_fleet
    before = parse_stack(fleet_raw()).vllm_fleet
    canary = deployment(CANARY, canary={**CANARY_PAIR, "replicas": 1})
    text = summarize({"steps": [
        step("update", tokens.K8S_CONFIG_MAP.type, "vllm-rollout", manifests.rollout_record(before),
             manifests.rollout_record(cfg)),
        step("create", DEPLOYMENT, "vllm-canary", None, canary)]}, None)
    assert "  - canary: v0.24.0 -> v0.25.0, revision da6e2ed -> 1234567\n" in text
    assert "**rollout ConfigMap** (`vllm-rollout`)" in text


def rollout(stable: dict[str, str], litellm: str = "1.91.1", registry: str = "ab" * 32,
            **harnesses: str) -> dict[str, Any]:
    """A rollout record's inputs: the stable pair and what it serves with."""
    return {"metadata": {"name": "vllm-rollout", "labels": {PART: ROLLOUT}},
            "data": {STABLE_JSON: json.dumps(stable), SERVED_WITH_JSON: json.dumps(
                {"gatewayVersion": litellm, "harnessVersions": {"codex": "0.169.0", **harnesses},
                 "toolRegistry": registry})}}


def test_the_rollout_record_shows_each_member_of_the_stable_tuple_that_moves():
    stable = {"tag": "v0.24.0", "model": "Qwen/Qwen3-Coder-Next-FP8", "revision": "da6e2ed27304dd"}
    bump = summarize({"steps": [step("update", tokens.K8S_CONFIG_MAP.type, "vllm-rollout",
                                     rollout(stable), rollout(stable, codex="0.170.0"))]}, None)
    assert "  - the stable tuple: codex 0.169.0 -> 0.170.0\n" in bump
    both = summarize({"steps": [step("update", tokens.K8S_CONFIG_MAP.type, "vllm-rollout",
                                     rollout(stable), rollout(CANARY_PAIR, litellm="1.108.7"))]}, None)
    assert ("  - the stable tuple: engine v0.24.0 -> v0.25.0; revision da6e2ed -> 1234567;"
            " LiteLLM 1.91.1 -> 1.108.7\n") in both
    tool = summarize({"steps": [step("update", tokens.K8S_CONFIG_MAP.type, "vllm-rollout",
                                     rollout(stable), rollout(stable, registry="cd" * 32))]}, None)
    assert "  - the stable tuple: tool registry abababababab -> cdcdcdcdcdcd\n" in tool
    same = summarize({"steps": [step("update", tokens.K8S_CONFIG_MAP.type, "vllm-rollout",
                                     rollout(stable), {**rollout(stable), "extra": 1})]}, None)
    assert "the stable tuple" not in same


# The agent seats (components/agent_seats): named by their seat, a harness bump read as its
# version old -> new, the key never shown.

def seat(codex: str = "0.169.0") -> dict[str, dict[str, Any]]:
    """ana's Codex seat's Deployment and key Secret, and Codex's dialect check Job, with the
    stack's codex version."""
    cfg = parse_stack({**seats_raw(), "harnesses": {"codex": codex}})
    sandbox = cfg.vllm_fleet.agent_sandbox
    ana, check = sandbox.seats["ana-codex"], seat_manifests.dialect_check(sandbox, "codex")
    trust = seat_manifests.GatewayTrust.of(cfg.gateway)
    entry = seat_manifests.wiring(ana, SEATS_GATEWAY_URL, cfg.harnesses, None)
    check_entry = seat_manifests.wiring(check, SEATS_GATEWAY_URL, cfg.harnesses, None)
    return {"deployment": seat_manifests.deployment(sandbox, ana, entry, trust),
            "secret": seat_manifests.key_secret(sandbox, ana),
            "check": seat_manifests.dialect_check_job(sandbox, check, check_entry, trust)}


def test_a_harness_bump_rolls_the_seat_naming_the_version_and_the_working_copy_it_loses():
    text = summarize({"steps": [step("update", DEPLOYMENT, "seat-ana-codex",
                                     seat()["deployment"], seat("0.170.0")["deployment"])]}, None)
    assert text.startswith(f"### `prod`: {ROLLING_UPDATE}\n")
    assert f"- **agent seat ana-codex Deployment** (`seat-ana-codex`): **{ROLLING_UPDATE}**" in text
    assert "  - codex: 0.169.0 -> 0.170.0\n" in text
    assert "  - the seat's pod is made anew: its working copy (/workspace) starts empty\n" in text


def test_a_harness_bump_replaces_its_dialect_check_which_runs_a_real_turn_before_the_seats_move():
    text = summarize({"steps": [step("replace", tokens.K8S_JOB.type, "seat-dialect-codex",
                                     seat()["check"], seat("0.170.0")["check"])]}, None)
    assert "- **codex dialect check Job** (`seat-dialect-codex`): **replace**" in text
    assert "  - codex: 0.169.0 -> 0.170.0\n" in text
    assert "  - one real codex 0.170.0 turn through the gateway, before its seats move\n" in text


def test_a_new_seat_says_whose_it_is_and_its_key_is_never_shown():
    old_key = {**seat()["secret"], "stringData": {"key": "sk-ana-OLD"}}
    new_key = {**seat()["secret"], "stringData": {"key": "sk-ana-NEW"}}
    text = summarize({"steps": [
        step("create", DEPLOYMENT, "seat-ana-codex", None, seat()["deployment"]),
        step("update", tokens.K8S_SECRET.type, "seat-ana-codex-key", old_key, new_key)]}, None)
    assert "  - codex 0.169.0 for ana, registry.example.com/spear/seat:2026.07@sha256:" in text
    assert "**agent seat ana-codex key Secret** (`seat-ana-codex-key`)" in text
    assert "sk-ana" not in text
