from policies.inference.llama_source_pinned import POLICY
from spear import tokens
from tests.support.policy_harness import check_resource, prod



def test_a_full_commit_passes():
    assert check_resource(POLICY, tokens.LLAMA_SERVER_BUILD, prod(tokens.LLAMA_SERVER_BUILD)) == []


def test_an_archive_with_its_sha256_passes():
    props = prod(tokens.LLAMA_SERVER_BUILD)
    props["source"] = {"archive": "/cache/llama_cpp_python-0.3.36.tar.gz", "sha256": "83" * 32,
                       "subdir": "llama_cpp_python-0.3.36/vendor/llama.cpp"}
    assert check_resource(POLICY, tokens.LLAMA_SERVER_BUILD, props) == []


def test_a_branch_name_is_a_violation():
    props = prod(tokens.LLAMA_SERVER_BUILD)
    props["source"]["commit"] = "master"
    [message] = check_resource(POLICY, tokens.LLAMA_SERVER_BUILD, props)
    assert "seed 001" in message and "'master'" in message and "40-hex" in message


def test_a_short_commit_is_a_violation():
    props = prod(tokens.LLAMA_SERVER_BUILD)
    props["source"]["commit"] = "aa6192d"
    assert len(check_resource(POLICY, tokens.LLAMA_SERVER_BUILD, props)) == 1


def test_an_archive_without_sha256_is_a_violation():
    props = prod(tokens.LLAMA_SERVER_BUILD)
    props["source"] = {"archive": "https://example.org/llama.cpp.tar.gz", "subdir": "."}
    [message] = check_resource(POLICY, tokens.LLAMA_SERVER_BUILD, props)
    assert "has no sha256" in message and "llamaCpp.source.sha256" in message


def test_other_resources_are_not_its_business():
    assert check_resource(POLICY, tokens.SERVER_CONF, prod(tokens.SERVER_CONF)) == []
