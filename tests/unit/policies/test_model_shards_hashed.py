from policies.inference.model_shards_hashed import POLICY
from spear import tokens
from tests.support.policy_harness import check_resource, prod



def test_every_shard_hashed_passes():
    assert check_resource(POLICY, tokens.MODEL_FILES, prod(tokens.MODEL_FILES)) == []


def test_a_shard_without_sha256_is_a_violation():
    props = prod(tokens.MODEL_FILES)
    del props["shards"][1]["sha256"]
    props["shards"][3]["sha256"] = "TODO"
    messages = check_resource(POLICY, tokens.MODEL_FILES, props)
    assert len(messages) == 2
    assert "00002-of-00004" in messages[0] and "00004-of-00004" in messages[1]
    assert all(m.startswith("seed 000 §6.2.1") for m in messages)


def test_an_empty_manifest_is_a_violation():
    props = prod(tokens.MODEL_FILES)
    props["shards"] = []
    [message] = check_resource(POLICY, tokens.MODEL_FILES, props)
    assert "no shards" in message
