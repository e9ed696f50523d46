import json

import pytest

from policies.kubernetes.priority_scheduling import POLICY
from tests.support.policy_harness import (UNKNOWN, check_stack, kube_objects, kube_stack, prod_stack,
                                          stable_container)

SEED = "seed 001 'How to run it in production' (the flag and the field deploy together)"


@pytest.mark.parametrize("priority", [True, False])
def test_the_fleet_renders_both_sides_together(priority):
    assert check_stack(POLICY, prod_stack(), kube_stack(kube_objects(schedulingPriority=priority))) == []


def test_priorities_without_priority_scheduling_are_a_violation():
    objects = kube_objects(schedulingPriority=True)
    command = stable_container(objects)["command"]
    at = command.index("--scheduling-policy")
    del command[at:at + 2]
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert message.startswith(f"{SEED}: vllm-stable container vllm runs without --scheduling-policy"
                              " priority while the gateway stamps priorities on its requests")


def test_priority_scheduling_without_priorities_is_a_violation():
    objects = kube_objects(schedulingPriority=True)
    objects["vllm-tenancy"][1]["data"]["priorities"] = json.dumps({})
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "runs with --scheduling-policy priority while the gateway stamps no priorities" in message


def test_unknown_priorities_cannot_pass():
    objects = kube_objects()
    objects["vllm-tenancy"][1]["data"]["priorities"] = UNKNOWN
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "cannot be verified at preview" in message
