from policies.endpoints.api_key_not_in_plain_text import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod


def test_a_key_in_the_environment_file_only_passes():
    assert check_resource(POLICY, tokens.POD_VLLM, prod(tokens.POD_VLLM)) == []
    assert check_resource(POLICY, tokens.RUNPOD_POD, prod(tokens.RUNPOD_POD)) == []


def test_the_api_key_flag_on_the_command_line_is_a_violation():
    props = prod(tokens.POD_VLLM)
    props["command_line"] += ["--api-key", "$VLLM_API_KEY"]
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    assert message.startswith("seed 001 steps 1 and 3 (the vLLM key lives in a secrets store,"
                              " exported as VLLM_API_KEY): the API key is on vLLM's command line")


def test_the_keys_value_anywhere_in_the_command_line_is_a_violation():
    props = prod(tokens.POD_VLLM)
    props["command_line"].append(f"--served-model-name={props['api_key']}")
    assert len(check_resource(POLICY, tokens.POD_VLLM, props)) == 1


def test_an_environment_file_others_can_read_is_a_violation():
    props = prod(tokens.POD_VLLM)
    props["env_file"]["mode"] = 420.0  # 0644, as the engine's JSON gives it
    [message] = check_resource(POLICY, tokens.POD_VLLM, props)
    assert "in a file of mode 644; it must be VLLM_API_KEY in a file of mode 600" in message


def test_a_key_in_the_pods_runpod_environment_is_a_violation():
    props = prod(tokens.RUNPOD_POD)
    props["env"]["VLLM_API_KEY"] = "vllm-PLACEHOLDER"
    [message] = check_resource(POLICY, tokens.RUNPOD_POD, props)
    assert "the pod's environment holds VLLM_API_KEY" in message


def test_the_runpod_key_under_another_name_in_the_pods_environment_is_a_violation():
    props = prod(tokens.RUNPOD_POD)
    props["env"]["EXTRA"] = props["api_key"]
    [message] = check_resource(POLICY, tokens.RUNPOD_POD, props)
    assert "holds the RunPod API key" in message


def test_an_unknown_pod_environment_cannot_pass():
    props = prod(tokens.RUNPOD_POD)
    props["env"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.RUNPOD_POD, props)
    assert "env can't be known during preview" in message
