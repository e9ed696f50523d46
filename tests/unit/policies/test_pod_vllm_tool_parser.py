from policies.endpoints.vllm_tool_parser import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod


def test_the_cookbooks_parser_flags_pass():
    assert check_resource(POLICY, tokens.POD_VLLM, prod(tokens.POD_VLLM)) == []


def test_without_auto_tool_choice_is_a_violation():
    props = prod(tokens.POD_VLLM)
    props["command_line"].remove("--enable-auto-tool-choice")
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    assert message.startswith("seed 001 step 3 (serve it: the parser flags this model needs):"
                              " --enable-auto-tool-choice is missing")


def test_another_parser_is_a_violation():
    props = prod(tokens.POD_VLLM)
    argv = props["command_line"]
    argv[argv.index("--tool-call-parser") + 1] = "hermes"
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    assert "--tool-call-parser is 'hermes', not 'qwen3_coder'" in message


def test_no_parser_flags_at_all_are_two_violations():
    props = prod(tokens.POD_VLLM)
    props["command_line"] = props["command_line"][:3]
    assert len(check_resource(POLICY, tokens.POD_VLLM, props)) == 2


def test_an_unknown_parser_cannot_pass():
    props = prod(tokens.POD_VLLM)
    argv = props["command_line"]
    argv[argv.index("--tool-call-parser") + 1] = UNKNOWN
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    assert "can't be known during preview" in message
