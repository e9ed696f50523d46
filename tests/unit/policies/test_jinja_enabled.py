from policies.inference.jinja_enabled import POLICY
from spear import tokens
from tests.support.policy_harness import check_resource, prod



def test_jinja_passes():
    assert check_resource(POLICY, tokens.SERVER_CONF, prod(tokens.SERVER_CONF)) == []


def test_no_jinja_is_a_violation():
    props = prod(tokens.SERVER_CONF)
    props["command_line"].remove("--jinja")
    [message] = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert message.startswith("seed 000 §6.2.2: --jinja is required")


def test_a_later_no_jinja_is_a_violation():
    props = prod(tokens.SERVER_CONF)
    props["command_line"].append("--no-jinja")
    assert len(check_resource(POLICY, tokens.SERVER_CONF, props)) == 1
