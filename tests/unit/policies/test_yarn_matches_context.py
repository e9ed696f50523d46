from policies.inference.yarn_matches_context import POLICY
from spear import tokens
from tests.support.policy_harness import check_resource, prod



def _within_trained_length():
    """dev: a window below the trained length, so no YaRN flags."""
    props = prod(tokens.SERVER_CONF)
    props["settings"]["SPEAR_SERVER_CTX"] = "65536"
    argv = props["command_line"]
    props["command_line"] = argv[:argv.index("--rope-scaling")]
    props["command_line"][props["command_line"].index("--ctx-size") + 1] = "65536"
    return props


def test_yarn_matching_twice_the_trained_length_passes():
    assert check_resource(POLICY, tokens.SERVER_CONF, prod(tokens.SERVER_CONF)) == []


def test_no_yarn_within_the_trained_length_passes():
    assert check_resource(POLICY, tokens.SERVER_CONF, _within_trained_length()) == []


def test_a_scale_that_is_not_a_whole_number_passes_when_it_is_the_ratio():
    props = prod(tokens.SERVER_CONF)
    props["settings"]["SPEAR_SERVER_CTX"] = "300000"
    argv = props["command_line"]
    argv[argv.index("--rope-scale") + 1] = "1.144409"  # serve.sh: 300000/262144, 6 places
    argv[-1] = "qwen3next.context_length=int:300000"
    assert check_resource(POLICY, tokens.SERVER_CONF, props) == []


def test_yarn_within_the_trained_length_is_a_violation():
    props = _within_trained_length()
    props["command_line"] += ["--rope-scaling", "yarn"]
    [message] = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert message.startswith("seed 000 §6.2.2") and "--rope-scaling" in message


def test_a_wrong_scale_and_a_missing_override_are_violations():
    props = prod(tokens.SERVER_CONF)
    argv = props["command_line"]
    argv[argv.index("--rope-scale") + 1] = "4"
    del argv[argv.index("--override-kv"):]
    [message] = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert "--rope-scale is 4, not 2" in message
    assert "override is missing, not qwen3next.context_length=int:524288" in message


def test_no_native_context_is_a_violation():
    props = prod(tokens.SERVER_CONF)
    del props["settings"]["SPEAR_SERVER_NATIVE_CTX"]
    [message] = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert "model.nativeCtx" in message
