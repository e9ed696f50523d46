from policies.kubernetes.agent_egress_default_deny import POLICY
from tests.support.policy_harness import UNKNOWN, check_stack, kube_objects, kube_stack, prod_stack

SEED = "seed 001 step 7 (sandbox what the agent executes: default-deny egress)"


def test_the_fleets_sandbox_passes():
    assert check_stack(POLICY, prod_stack(), kube_stack(kube_objects())) == []


def test_an_agent_namespace_without_the_deny_policy_is_a_violation():
    objects = kube_objects()
    del objects["vllm-agents-deny-egress"]
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert message.startswith(f"{SEED}: the agent namespace 'agents' has no NetworkPolicy that"
                              " selects every pod and denies all egress")


def test_a_deny_policy_that_allows_something_or_selects_some_pods_does_not_count():
    objects = kube_objects()
    deny = objects["vllm-agents-deny-egress"][1]["spec"]
    deny["egress"] = [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]
    assert len(check_stack(POLICY, prod_stack(), kube_stack(objects))) == 1
    objects = kube_objects()
    objects["vllm-agents-deny-egress"][1]["spec"]["podSelector"] = {"matchLabels": {"a": "b"}}
    assert len(check_stack(POLICY, prod_stack(), kube_stack(objects))) == 1


def test_an_unknown_namespace_cannot_pass():
    objects = kube_objects()
    objects["vllm-agents-deny-egress"][1]["metadata"]["namespace"] = UNKNOWN
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "cannot be verified at preview" in message
