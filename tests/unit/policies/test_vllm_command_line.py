"""The vLLM command-line rules, each once for every target: a RunPod pod's vLLM and the fleet's
Deployments give the same verdict on the same command line (policies/vllm/)."""

import pytest

from policies.common import vllm_commands
from policies.vllm import forbidden_flags, revision_pinned, tool_parser
from spear import tokens
from spear.vllm import FORBIDDEN_FLAGS
from tests.support.policy_harness import UNKNOWN, check_resource, kube_objects, prod, stable_container


def on_pod(argv=None, image="vllm/vllm-openai:v0.24.0"):
    props = prod(tokens.POD_VLLM)
    if argv is not None:
        props["command_line"] = argv
    props["image"] = image
    return tokens.POD_VLLM, props


def in_deployment(argv=None, image=None):
    objects = kube_objects()
    container = stable_container(objects)
    if argv is not None:
        container["command"], container["args"] = argv, []
    if image is not None:
        container["image"] = image
    return tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1]


TARGETS = {"pod gpu-vllm": on_pod, "container vllm": in_deployment}


def rendered(target):
    """The target's own rendered command line, to break one flag at a time."""
    token, props = TARGETS[target]()
    [command] = vllm_commands(token.type, props, "gpu-vllm")
    return command.argv


def replaced(argv, flag, value):
    argv = list(argv)
    argv[argv.index(flag) + 1] = value
    return argv


def without(argv, flag, *, value=True):
    at = argv.index(flag)
    return argv[:at] + argv[at + 1 + value:]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rule", [revision_pinned, tool_parser, forbidden_flags])
def test_each_targets_rendered_command_line_passes_each_rule(rule, target):
    assert check_resource(rule.POLICY, *TARGETS[target]()) == []


@pytest.mark.parametrize("target", TARGETS)
def test_a_branch_as_revision_is_refused_on_every_target_naming_it(target):
    argv = replaced(rendered(target), "--revision", "main")
    [message] = check_resource(revision_pinned.POLICY, *TARGETS[target](argv))
    assert message.startswith(f"seed 001 step 2 (pin the model): {target} serves the model at"
                              " revision 'main', not a full 40-hex commit id")


@pytest.mark.parametrize("target", TARGETS)
def test_no_revision_at_all_is_refused_on_every_target(target):
    [message] = check_resource(revision_pinned.POLICY, *TARGETS[target](
        without(rendered(target), "--revision")))
    assert "at revision None" in message


@pytest.mark.parametrize("target", TARGETS)
def test_no_parser_flags_are_refused_on_every_target_naming_both(target):
    argv = without(without(rendered(target), "--tool-call-parser"), "--enable-auto-tool-choice",
                   value=False)
    [message] = check_resource(tool_parser.POLICY, *TARGETS[target](argv))
    assert message.startswith("seed 001 step 3 (serve it: the parser flags this model needs):"
                              f" {target} lacks --enable-auto-tool-choice and --tool-call-parser"
                              " qwen3_coder")


@pytest.mark.parametrize("target", TARGETS)
def test_another_parser_is_refused_on_every_target(target):
    argv = replaced(rendered(target), "--tool-call-parser", "hermes")
    [message] = check_resource(tool_parser.POLICY, *TARGETS[target](argv))
    assert "lacks --tool-call-parser qwen3_coder (or a name of its parser on this engine;" \
           " 'hermes' is not)" in message


@pytest.mark.parametrize("target", TARGETS)
def test_the_parsers_alias_passes_on_the_engine_that_gives_it_and_not_on_an_older_one(target):
    """The pod's engine version is its image's tag, as the Deployment's is: the two rules were
    copies that disagreed here (the pod's read no engine version)."""
    argv = replaced(rendered(target), "--tool-call-parser", "qwen3_xml")
    assert check_resource(tool_parser.POLICY,
                          *TARGETS[target](argv, image="vllm/vllm-openai:v0.24.0")) == []
    [message] = check_resource(tool_parser.POLICY,
                               *TARGETS[target](argv, image="vllm/vllm-openai:v0.23.1"))
    assert "'qwen3_xml' is not" in message


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("flag", sorted(FORBIDDEN_FLAGS))
def test_each_forbidden_flag_is_refused_in_either_form_on_every_target(flag, target):
    for extra in ([f"{flag}=x"], [flag, "x"]):
        [message] = check_resource(forbidden_flags.POLICY,
                                   *TARGETS[target](rendered(target) + extra))
        assert message.startswith(f"seed 001 step 3 (what must never be added): {target} is given"
                                  f" {flag}: {FORBIDDEN_FLAGS[flag]}")


@pytest.mark.parametrize("rule", [revision_pinned, tool_parser, forbidden_flags])
def test_a_command_line_unknown_at_preview_cannot_pass_on_any_target(rule):
    [pod] = check_resource(rule.POLICY, *on_pod(UNKNOWN))
    assert "can't be known during preview" in pod
    objects = kube_objects()
    stable_container(objects)["args"] = UNKNOWN
    [deployment] = check_resource(rule.POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert "cannot be verified at preview" in deployment


def test_other_resources_are_not_their_business():
    for rule in (revision_pinned, tool_parser, forbidden_flags):
        assert check_resource(rule.POLICY, tokens.RUNPOD_POD, prod(tokens.RUNPOD_POD)) == []
