from policies.kubernetes.gpu_limit_matches_tp import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, kube_objects, stable_container


def test_the_limit_rendered_from_the_tensor_parallel_size_passes():
    objects = kube_objects(tensorParallelSize=4)
    assert stable_container(objects)["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1]) == []


def test_a_limit_other_than_the_tensor_parallel_size_is_a_violation():
    objects = kube_objects()
    stable_container(objects)["resources"]["limits"]["nvidia.com/gpu"] = "1"
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert message.startswith("seed 001 step 3 (--tensor-parallel-size splits the model over the"
                              " replica's GPUs): container vllm has nvidia.com/gpu limit 1 but"
                              " --tensor-parallel-size 2")


def test_no_limit_is_a_violation():
    objects = kube_objects()
    del stable_container(objects)["resources"]["limits"]
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert "nvidia.com/gpu limit unset" in message


def test_an_unknown_limit_cannot_pass():
    objects = kube_objects()
    stable_container(objects)["resources"]["limits"]["nvidia.com/gpu"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, objects["vllm-stable"][1])
    assert "cannot be verified at preview" in message
