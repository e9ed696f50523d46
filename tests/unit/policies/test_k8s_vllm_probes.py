import pytest

from policies.kubernetes.vllm_probes import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, kube_objects, stable_container


def test_the_rendered_probes_pass():
    assert check_resource(POLICY, tokens.K8S_DEPLOYMENT, kube_objects()["vllm-stable"][1]) == []


@pytest.mark.parametrize("probe", ["readinessProbe", "livenessProbe"])
def test_a_missing_probe_is_a_violation(probe):
    objects = kube_objects()
    del stable_container(objects)[probe]
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert message.startswith("seed 001 'How to run it in production' (probes, rollout): container"
                              f" vllm has no {probe}")


def test_an_unknown_probe_cannot_pass():
    objects = kube_objects()
    stable_container(objects)["livenessProbe"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert "cannot be verified at preview" in message
