from policies.kubernetes.api_key_from_secret import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, kube_objects, stable_container

SEED = "seed 001 steps 1 and 3 (the vLLM key lives in a secrets store, exported as VLLM_API_KEY)"


def test_the_key_from_the_fleets_secret_passes():
    assert check_resource(POLICY, tokens.K8S_DEPLOYMENT, kube_objects()["vllm-stable"][1]) == []


def test_a_literal_key_is_a_violation():
    objects = kube_objects()
    stable_container(objects)["env"] = [{"name": "VLLM_API_KEY", "value": "sk-in-the-open"}]
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert message.startswith(f"{SEED}: container vllm gets VLLM_API_KEY as a literal value")
    assert "sk-in-the-open" not in message


def test_a_key_on_the_command_line_and_none_in_the_environment_are_violations():
    objects = kube_objects()
    stable_container(objects)["args"] = ["--api-key", "sk-x"]
    stable_container(objects)["env"] = []
    messages = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert [m[len(SEED) + 2:].split(".")[0] for m in messages] == [
        "container vllm has --api-key on its command line",
        "container vllm has no VLLM_API_KEY: vLLM would serve anyone"]


def test_an_unknown_environment_cannot_pass():
    objects = kube_objects()
    stable_container(objects)["env"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert "cannot be verified at preview" in message
