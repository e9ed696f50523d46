from policies.kubernetes.vllm_revision_pinned import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, kube_objects, stable_container


def with_revision(revision):
    objects = kube_objects()
    command = stable_container(objects)["command"]
    command[command.index("--revision") + 1] = revision
    return objects["vllm-stable"][1]


def test_the_fleets_pinned_revision_passes():
    assert check_resource(POLICY, tokens.K8S_DEPLOYMENT, kube_objects()["vllm-stable"][1]) == []


def test_a_branch_is_a_violation():
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, with_revision("main"))
    assert message.startswith("seed 001 step 2 (pin the model): container vllm serves the model at"
                              " revision 'main', not a full 40-hex commit id")


def test_an_unknown_revision_cannot_pass():
    [message] = check_resource(POLICY, tokens.K8S_DEPLOYMENT, with_revision(UNKNOWN))
    assert "cannot be verified at preview" in message
