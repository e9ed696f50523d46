from policies.inference.context_size_explicit import POLICY
from spear import tokens
from tests.support.policy_harness import check_resource, prod



def test_a_stated_context_passed_to_the_server_passes():
    assert check_resource(POLICY, tokens.SERVER_CONF, prod(tokens.SERVER_CONF)) == []


def test_no_context_in_server_conf_is_a_violation():
    props = prod(tokens.SERVER_CONF)
    del props["settings"]["SPEAR_SERVER_CTX"]
    [message] = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert message.startswith("seed 000 §6.2.3") and "server.ctxSize" in message


def test_a_command_line_without_ctx_size_is_a_violation():
    props = prod(tokens.SERVER_CONF)
    i = props["command_line"].index("--ctx-size")
    del props["command_line"][i:i + 2]
    [message] = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert "without --ctx-size" in message


def test_a_later_short_flag_wins_and_is_a_violation():
    props = prod(tokens.SERVER_CONF)
    props["command_line"] += ["-c", "4096"]
    [message] = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert "with --ctx-size 4096, but server.conf states 524288" in message
