import pytest

from policies.kubernetes.vllm_forbidden_flags import POLICY
from spear import tokens
from spear.vllm import FORBIDDEN_FLAGS
from tests.support.policy_harness import UNKNOWN, check_resource, kube_objects, stable_container


def test_the_rendered_command_passes():
    assert check_resource(POLICY, tokens.K8S_DEPLOYMENT, kube_objects()["vllm-stable"][1]) == []


@pytest.mark.parametrize("flag", sorted(FORBIDDEN_FLAGS))
def test_each_forbidden_flag_is_a_violation(flag):
    objects = kube_objects()
    stable_container(objects)["args"] = [f"{flag}=x"]
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert message.startswith(f"seed 001 step 3 (what must never be added): container vllm is"
                              f" given {flag}: {FORBIDDEN_FLAGS[flag]}")


def test_unknown_args_cannot_pass():
    objects = kube_objects()
    stable_container(objects)["args"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert "cannot be verified at preview" in message
