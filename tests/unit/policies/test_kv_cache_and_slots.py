from pulumi_policy import EnforcementLevel

from policies.inference.kv_cache_and_slots import POLICY
from spear import tokens
from tests.support.policy_harness import check_resource, defaults, prod



def test_it_only_advises():
    assert POLICY.enforcement_level is EnforcementLevel.ADVISORY


def test_q8_0_and_one_slot_pass():
    assert check_resource(POLICY, tokens.SERVER_CONF, prod(tokens.SERVER_CONF)) == []


def test_four_slots_and_an_f16_cache_are_violations():
    props = prod(tokens.SERVER_CONF)
    argv = props["command_line"]
    argv[argv.index("--parallel") + 1] = "4"
    argv += ["-ctv", "f16"]
    cache_v, slots = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert cache_v.startswith("seed 000 §6.2.2") and "--cache-type-v f16, not q8_0" in cache_v
    assert "--parallel 4, not 1 slot(s)" in slots and "server.parallel to 1" in slots


def test_the_deployment_can_expect_other_values():
    props = prod(tokens.SERVER_CONF)
    argv = props["command_line"]
    argv[argv.index("--parallel") + 1] = "4"
    assert check_resource(POLICY, tokens.SERVER_CONF, props, config={**defaults(POLICY), "slots": 4}) == []
