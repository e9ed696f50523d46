from harness import check_resource, prod

from yarn_matches_context import POLICY


def _within_trained_length():
    """dev: a window below the trained length, so no YaRN flags."""
    props = prod("server-conf")
    props["settings"]["SPEAR_SERVER_CTX"] = "65536"
    argv = props["command_line"]
    props["command_line"] = argv[:argv.index("--rope-scaling")]
    props["command_line"][props["command_line"].index("--ctx-size") + 1] = "65536"
    return props


def test_yarn_matching_twice_the_trained_length_passes():
    assert check_resource(POLICY, prod("server-conf")) == []


def test_no_yarn_within_the_trained_length_passes():
    assert check_resource(POLICY, _within_trained_length()) == []


def test_a_scale_that_is_not_a_whole_number_passes_when_it_is_the_ratio():
    props = prod("server-conf")
    props["settings"]["SPEAR_SERVER_CTX"] = "300000"
    argv = props["command_line"]
    argv[argv.index("--rope-scale") + 1] = "1.144409"  # serve.sh: 300000/262144, 6 places
    argv[-1] = "qwen3next.context_length=int:300000"
    assert check_resource(POLICY, props) == []


def test_yarn_within_the_trained_length_is_a_violation():
    props = _within_trained_length()
    props["command_line"] += ["--rope-scaling", "yarn"]
    [message] = check_resource(POLICY, props)
    assert message.startswith("seed 000 §6.2.2") and "--rope-scaling" in message


def test_a_wrong_scale_and_a_missing_override_are_violations():
    props = prod("server-conf")
    argv = props["command_line"]
    argv[argv.index("--rope-scale") + 1] = "4"
    del argv[argv.index("--override-kv"):]
    [message] = check_resource(POLICY, props)
    assert "--rope-scale is 4, not 2" in message
    assert "override is missing, not qwen3next.context_length=int:524288" in message


def test_no_native_context_is_a_violation():
    props = prod("server-conf")
    del props["settings"]["SPEAR_SERVER_NATIVE_CTX"]
    [message] = check_resource(POLICY, props)
    assert "model.nativeCtx" in message
