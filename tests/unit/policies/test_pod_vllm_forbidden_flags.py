import pytest

from policies.endpoints.vllm_forbidden_flags import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod


def test_the_cookbooks_flags_pass():
    assert check_resource(POLICY, tokens.POD_VLLM, prod(tokens.POD_VLLM)) == []


@pytest.mark.parametrize("extra", [["--reasoning-parser", "qwen3"], ["--quantization=fp8"],
                                   ["--enable-prefix-caching"]])
def test_each_forbidden_flag_is_a_violation_in_either_form(extra):
    props = prod(tokens.POD_VLLM)
    props["command_line"] += extra
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    flag = extra[0].partition("=")[0]
    assert message.startswith(f"seed 001 step 3 (what must never be added): vLLM is given {flag}:")


def test_the_off_switch_of_prefix_caching_is_refused_too():
    props = prod(tokens.POD_VLLM)
    props["command_line"].append("--no-enable-prefix-caching")
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    assert "vLLM is given --no-enable-prefix-caching: it turns off the prefix cache" in message


def test_an_unknown_command_line_cannot_pass():
    props = prod(tokens.POD_VLLM)
    props["command_line"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    assert "cannot be verified at preview" in message
