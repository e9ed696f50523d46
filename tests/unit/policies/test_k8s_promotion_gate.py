"""k8s-promotion-gate: the stable pair is the previous one or has a passing gate record, each
record re-judged from the evidence the rollout ConfigMap carries (a verdict written there by hand
or by another program is not believed)."""

import base64
import gzip
import json

import pytest

from policies.kubernetes.promotion_gate import POLICY
from tests.support import gate_records as records
from tests.support.config_cases import CANARY_PAIR, STABLE_PAIR
from tests.support.policy_harness import UNKNOWN, check_stack, kube_objects, kube_stack, prod_stack

SEED = "seed 001 step 8 (gate the rollout on the acceptance test)"
PROMOTED = "vllm-stable promotes v0.25.0 @ Qwen/Qwen3-Coder-Next-FP8 revision 1234567 to stable"


@pytest.fixture(autouse=True)
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(records.project(tmp_path))


def promoted(**run):
    """The fleet promoted with a record the gate wrote (its run as `run` says)."""
    records.write_record("canary-1", CANARY_PAIR, **run)
    return kube_objects(stable=CANARY_PAIR, previous=STABLE_PAIR, rolloutGate=records.gate_config())


def rollout(objects):
    return objects["vllm-rollout"][1]


def test_a_promotion_with_a_passing_record_and_a_rollback_pass():
    assert check_stack(POLICY, prod_stack(), kube_stack(promoted())) == []
    rollback = kube_objects(stable=STABLE_PAIR, previous=STABLE_PAIR)
    assert check_stack(POLICY, prod_stack(), kube_stack(rollback)) == []


def test_a_promotion_whose_record_fails_is_a_violation():
    objects = promoted()
    # Another run's record and evidence in the ConfigMap (the config check refuses such a stack
    # file; the pack must refuse the objects too): 4 tool calls answered as text.
    path = records.write_record("canary-1", CANARY_PAIR, markup_calls=4)
    evidence = path.with_name("canary-1.evidence.jsonl").read_bytes()
    rollout(objects)["data"]["gate-records.json"] = json.dumps([json.loads(path.read_text())])
    rollout(objects)["binaryData"]["evidence.canary-1.jsonl.gz"] = base64.b64encode(
        gzip.compress(evidence)).decode()
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert message.startswith(f"{SEED}: {PROMOTED} without a passing gate record: record canary-1:"
                              " the tool-call validator admitted 96 of 100 live samples")


def test_a_record_edited_in_the_configmap_does_not_stand():
    objects = promoted()
    data = rollout(objects)["data"]
    [record] = json.loads(data["gate-records.json"])
    record["results"]["toolCalls"]["total"] = 400
    data["gate-records.json"] = json.dumps([record])
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "record canary-1 does not stand (results.toolCalls.total: 400 where the evidence gives 100)" \
        in message


def test_evidence_altered_in_the_configmap_does_not_stand():
    objects = promoted()
    binary = rollout(objects)["binaryData"]
    evidence = gzip.decompress(base64.b64decode(binary["evidence.canary-1.jsonl.gz"]))
    binary["evidence.canary-1.jsonl.gz"] = base64.b64encode(gzip.compress(evidence + b"\n")).decode()
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "evidence.sha256:" in message and "it was altered after the run" in message


def test_a_promotion_served_with_another_harness_than_its_record_measured_is_a_violation():
    objects = promoted()
    data = rollout(objects)["data"]
    served = json.loads(data["served-with.json"])
    assert served["harnessVersions"]["codex"] == "0.169.0"  # what the stack declares
    served["harnessVersions"]["codex"] = "0.170.0"
    data["served-with.json"] = json.dumps(served)
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "record canary-1 measured the pair under another tuple (pin.harnessVersions.codex:" \
        " 0.169.0, where the stack pins 0.170.0)" in message


def test_a_rollout_record_that_does_not_say_what_the_pair_is_served_with_promotes_nothing():
    objects = promoted()
    del rollout(objects)["data"]["served-with.json"]
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "the rollout record does not say what the stable pair is served with" in message


def test_a_promotion_without_any_record_is_a_violation():
    objects = promoted()
    rollout(objects)["data"]["gate-records.json"] = "[]"
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "no gate record pins exactly v0.25.0 @ Qwen/Qwen3-Coder-Next-FP8 revision 1234567" in message


def test_a_stable_deployment_without_a_rollout_record_is_a_violation():
    objects = kube_objects()
    del objects["vllm-rollout"]
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "serves the stable track in 'vllm', which has no rollout record" in message


def test_unknown_records_cannot_pass():
    objects = promoted()
    rollout(objects)["data"]["gate-records.json"] = UNKNOWN
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "cannot be verified at preview" in message


def test_only_the_stable_pairs_records_travel_in_the_configmap():
    records.write_record("other", {**CANARY_PAIR, "tag": "v0.25.1"})
    objects = promoted()
    assert [r["name"] for r in json.loads(rollout(objects)["data"]["gate-records.json"])] == ["canary-1"]
    assert set(rollout(objects)["binaryData"]) == {"gate-tasks.jsonl.gz", "evidence.canary-1.jsonl.gz"}
