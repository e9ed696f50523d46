"""The vLLM fleet's Kubernetes vocabulary: the labels, annotations and record keys that the
component writes (components/vllm_fleet/manifests.py) and the policy pack and the preview
summary read. Pure, so the policy pack's virtualenv imports it too."""

from __future__ import annotations

APP = "vllm"  # every fleet pod; each track has its own Service (app=vllm, track=<track>)
TRACK = "track"
STABLE, CANARY = "stable", "canary"
PART = "spear-fleet/part"  # what a ConfigMap is for
ROLLOUT, TENANCY, ALERTS = "rollout", "tenancy", "alerts"
MONITORING = "monitoring"  # whatever scrapes the fleet and evaluates its rules
ROLE = "spear-fleet/role"  # what a namespace is for
AGENT_SANDBOX = "agent-sandbox"
ENGINE_VERSION = "spear-fleet/engine-version"
REVISION = "spear-fleet/revision"
# The rollout record's data keys (JSON): the pairs, the gate policy, and the gate records as their
# runs wrote them with the verdicts the config check found; its binaryData (gzip) holds what the
# policy pack re-judges them by: the task set and each record's evidence.
STABLE_JSON, PREVIOUS_JSON, CANARY_JSON, RECORDS_JSON, GATE_POLICY_JSON = (
    "stable.json", "previous.json", "canary.json", "gate-records.json", "gate-policy.json")
# What the stable pair is served with (LiteLLM's and the harnesses' versions, the tool
# registry), which a promotion's record must pin: null without a gate.
SERVED_WITH_JSON = "served-with.json"
GATE_TASKS_GZ = "gate-tasks.jsonl.gz"


def evidence_key(record: str) -> str:
    return f"evidence.{record}.jsonl.gz"
# The tenancy record's data keys: the cache_salt scope and the priorities the gateway stamps
# (JSON, {} when vLLM does not schedule by priority).
CACHE_SALT, PRIORITIES = "cacheSalt", "priorities"
