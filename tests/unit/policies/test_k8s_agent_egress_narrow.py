from policies.kubernetes.agent_egress_narrow import POLICY
from tests.support.policy_harness import UNKNOWN, check_stack, kube_objects, kube_stack, prod_stack

SEED = "seed 001 step 7 (sandbox what the agent executes: egress only to the gateway and the mirrors)"


def allow_rules(objects):
    return objects["vllm-agents-allow-egress"][1]["spec"]["egress"]


def test_the_fleets_gateway_mirrors_and_dns_pass():
    assert check_stack(POLICY, prod_stack(), kube_stack(kube_objects())) == []


def test_an_allowlist_open_to_every_address_is_a_violation_naming_the_rule():
    objects = kube_objects()
    allow_rules(objects)[0]["to"] = [{"ipBlock": {"cidr": "0.0.0.0/0"}}]
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert message.startswith(f"{SEED}: NetworkPolicy 'allow-egress' egress[0]: 0.0.0.0/0 is"
                              " 4294967296 addresses, wider than /24")


def test_a_rule_without_destinations_or_with_every_namespace_is_a_violation():
    objects = kube_objects()
    allow_rules(objects).append({"ports": [{"protocol": "TCP", "port": 443}]})
    allow_rules(objects).append({"to": [{"namespaceSelector": {}}]})
    messages = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert [m.removeprefix(f"{SEED}: ").split(": ")[0] for m in messages] == [
        "NetworkPolicy 'allow-egress' egress[3]", "NetworkPolicy 'allow-egress' egress[4]"]
    assert "no destinations, which allows every one" in messages[0]
    assert "neither an ipBlock nor the cluster's DNS" in messages[1]


def test_a_subnet_wider_than_a_mirrors_is_a_violation_and_v6_is_held_to_a_64():
    objects = kube_objects()
    allow_rules(objects)[1]["to"] = [{"ipBlock": {"cidr": "10.20.0.0/16"}}]
    allow_rules(objects)[2]["to"] = [{"ipBlock": {"cidr": "2001:db8::/48"}}]
    assert len(check_stack(POLICY, prod_stack(), kube_stack(objects))) == 2


def test_an_unknown_destination_cannot_pass():
    objects = kube_objects()
    allow_rules(objects)[0]["to"] = UNKNOWN
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "cannot be verified at preview" in message
