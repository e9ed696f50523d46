import json

from policies.kubernetes.promotion_gate import POLICY
from tests.support.config_cases import CANARY_PAIR, STABLE_PAIR, passing_record
from tests.support.policy_harness import UNKNOWN, check_stack, kube_objects, kube_stack, prod_stack

SEED = "seed 001 step 8 (gate the rollout on the acceptance test)"


def promoted(record=None):
    """The fleet promoted with a passing record, then (when given) the record replaced in the
    rollout ConfigMap, as a stack edited by hand or by another program would show it."""
    objects = kube_objects(stable=CANARY_PAIR, previous=STABLE_PAIR,
                           rolloutGate={"canary-1": passing_record(CANARY_PAIR)})
    if record is not None:
        data = objects["vllm-rollout"][1]["data"]
        data["gate-records.json"] = json.dumps(record)
    return objects


def test_a_promotion_with_a_passing_record_and_a_rollback_pass():
    assert check_stack(POLICY, prod_stack(), kube_stack(promoted())) == []
    rollback = kube_objects(stable=STABLE_PAIR, previous=STABLE_PAIR)
    assert check_stack(POLICY, prod_stack(), kube_stack(rollback)) == []


def test_a_promotion_whose_record_fails_is_a_violation():
    [record] = json.loads(promoted()["vllm-rollout"][1]["data"]["gate-records.json"])
    record["toolCalls"]["passed"] = 390
    [message] = check_stack(POLICY, prod_stack(), kube_stack(promoted([record])))
    assert message.startswith(f"{SEED}: vllm-stable promotes v0.25.0 @ Qwen/Qwen3-Coder-Next-FP8"
                              " revision 1234567 to stable without a passing gate record: record"
                              " canary-1: the tool-call validator passed 390 of 400")


def test_a_promotion_without_any_record_is_a_violation():
    [message] = check_stack(POLICY, prod_stack(), kube_stack(promoted([])))
    assert "no gate record pins exactly v0.25.0 @ Qwen/Qwen3-Coder-Next-FP8 revision 1234567" in message


def test_a_stable_deployment_without_a_rollout_record_is_a_violation():
    objects = kube_objects()
    del objects["vllm-rollout"]
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "serves the stable track in 'vllm', which has no rollout record" in message


def test_unknown_records_cannot_pass():
    objects = promoted()
    objects["vllm-rollout"][1]["data"]["gate-records.json"] = UNKNOWN
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "cannot be verified at preview" in message
