from policies.endpoints.vllm_revision_pinned import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod


def with_argv(argv):
    props = prod(tokens.POD_VLLM)
    props["command_line"] = argv
    return props


def test_the_cookbooks_pinned_revision_passes():
    assert check_resource(POLICY, tokens.POD_VLLM, prod(tokens.POD_VLLM)) == []


def test_a_branch_name_as_revision_is_a_violation():
    props = prod(tokens.POD_VLLM)
    argv = props["command_line"]
    argv[argv.index("--revision") + 1] = "main"
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    assert message.startswith("seed 001 step 2 (pin the model): vLLM serves the model at revision"
                              " 'main'")
    assert "Fix: set runpod.pods.<name>.vllm.revision" in message


def test_no_revision_at_all_is_a_violation():
    argv = prod(tokens.POD_VLLM)["command_line"]
    at = argv.index("--revision")
    [message] = check_resource(POLICY, tokens.POD_VLLM, with_argv(argv[:at] + argv[at + 2:]))
    assert "at revision None" in message


def test_an_unknown_command_line_cannot_pass():
    [message] = check_resource(POLICY, tokens.POD_VLLM, with_argv(UNKNOWN))
    assert "command_line can't be known during preview" in message


def test_other_resources_are_not_its_business():
    assert check_resource(POLICY, tokens.RUNPOD_POD, prod(tokens.RUNPOD_POD)) == []
