from policies.kubernetes.agent_egress_narrow import POLICY
from spear import tokens
from spear.rules import GATEWAY_APP, GATEWAY_POD_LABELS, pods_peer
from tests.support.policy_harness import UNKNOWN, check_stack, kube_objects, kube_stack, prod_stack

SEED = "seed 001 step 7 (sandbox what the agent executes: egress only to the gateway and the mirrors)"


def allow_rules(objects):
    return objects["vllm-agents-allow-egress"][1]["spec"]["egress"]


def test_the_fleets_mirrors_pass():
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
        "NetworkPolicy 'allow-egress' egress[1]", "NetworkPolicy 'allow-egress' egress[2]"]
    assert "no destinations, which allows every one" in messages[0]
    assert "neither an ipBlock nor the gateway's pods" in messages[1]


def test_the_clusters_dns_is_a_way_out_and_a_violation():
    objects = kube_objects()
    allow_rules(objects).append({"to": [pods_peer("kube-system", {"k8s-app": "kube-dns"})],
                                 "ports": [{"protocol": "UDP", "port": 53}]})
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "egress[1]: a destination" in message and "neither an ipBlock nor the gateway's pods" in message


def gateway_deployment(namespace: str) -> tuple[tokens.ProviderType, dict]:
    return tokens.K8S_DEPLOYMENT, {"metadata": {"name": GATEWAY_APP, "namespace": namespace},
                                   "spec": {"selector": {"matchLabels": dict(GATEWAY_POD_LABELS)}}}


def test_the_stacks_own_gateway_pods_pass_and_the_same_selector_anywhere_else_does_not():
    objects = kube_objects()
    allow_rules(objects).append({"to": [pods_peer("gateway", GATEWAY_POD_LABELS)],
                                 "ports": [{"protocol": "TCP", "port": 4000}]})
    objects["gateway-deployment"] = gateway_deployment("gateway")
    assert check_stack(POLICY, prod_stack(), kube_stack(objects)) == []
    objects["gateway-deployment"] = gateway_deployment("elsewhere")
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "egress[1]" in message and "neither an ipBlock nor the gateway's pods" in message
    del objects["gateway-deployment"]
    assert len(check_stack(POLICY, prod_stack(), kube_stack(objects))) == 1


def test_a_subnet_wider_than_a_mirrors_is_a_violation_and_v6_is_held_to_a_64():
    objects = kube_objects()
    allow_rules(objects)[0]["to"] = [{"ipBlock": {"cidr": "10.20.0.0/16"}}]
    allow_rules(objects).append({"to": [{"ipBlock": {"cidr": "2001:db8::/48"}}]})
    assert len(check_stack(POLICY, prod_stack(), kube_stack(objects))) == 2


def test_an_unknown_destination_cannot_pass():
    objects = kube_objects()
    allow_rules(objects)[0]["to"] = UNKNOWN
    [message] = check_stack(POLICY, prod_stack(), kube_stack(objects))
    assert "cannot be verified at preview" in message
