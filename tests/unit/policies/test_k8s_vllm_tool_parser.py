from policies.kubernetes.vllm_tool_parser import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, kube_objects, stable_container


def test_the_rendered_command_passes():
    assert check_resource(POLICY, tokens.K8S_DEPLOYMENT, kube_objects()["vllm-stable"][1]) == []


def test_a_command_without_the_parser_flags_is_a_violation():
    objects = kube_objects()
    command = stable_container(objects)["command"]
    at = command.index("--tool-call-parser")
    del command[at:at + 2]
    command.remove("--enable-auto-tool-choice")
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert message.startswith("seed 001 step 3 (serve it: the parser flags this model needs):"
                              " container vllm lacks --enable-auto-tool-choice and"
                              " --tool-call-parser qwen3_coder")


def test_another_parser_is_a_violation():
    objects = kube_objects()
    command = stable_container(objects)["command"]
    command[command.index("--tool-call-parser") + 1] = "hermes"
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert "lacks --tool-call-parser qwen3_coder" in message


def test_an_unknown_command_cannot_pass():
    objects = kube_objects()
    stable_container(objects)["command"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert "cannot be verified at preview" in message


def with_parser(parser: str, tag: str):
    objects = kube_objects()
    container = stable_container(objects)
    container["command"][container["command"].index("--tool-call-parser") + 1] = parser
    container["image"] = f"vllm/vllm-openai:{tag}"
    return objects["vllm-stable"][1]


def test_the_parsers_alias_passes_on_the_engine_that_gives_it_and_not_on_an_older_one():
    assert check_resource(POLICY, tokens.K8S_DEPLOYMENT, with_parser("qwen3_xml", "v0.24.0")) == []
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, with_parser("qwen3_xml", "v0.23.1"))
    assert "lacks --tool-call-parser qwen3_coder (or a name of its parser on this engine;" \
           " 'qwen3_xml' is not)" in message
