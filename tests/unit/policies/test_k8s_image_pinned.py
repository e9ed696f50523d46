import pytest

from policies.kubernetes.image_pinned import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, kube_objects, stable_container


def deployment(image):
    objects = kube_objects()
    if image is not None:
        stable_container(objects)["image"] = image
    return objects["vllm-stable"][1]


@pytest.mark.parametrize("image", [None, "vllm/vllm-openai:v0.24.0@sha256:" + "a" * 64,
                                   "registry.internal:5000/vllm/vllm-openai@sha256:" + "b" * 64])
def test_a_version_tag_or_a_digest_passes(image):
    assert check_resource(POLICY, tokens.K8S_DEPLOYMENT, deployment(image)) == []


@pytest.mark.parametrize("image,problem", [("vllm/vllm-openai:latest", "is tagged :latest"),
                                           ("vllm/vllm-openai", "has no tag")])
def test_latest_or_no_tag_is_a_violation(image, problem):
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, deployment(image))
    assert message.startswith("seed 001 'How to maintain it' (the engine version is part of the pin):"
                              f" container vllm: '{image}' {problem}")


def test_an_unknown_image_cannot_pass():
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, deployment(UNKNOWN))
    assert "cannot be verified at preview" in message
