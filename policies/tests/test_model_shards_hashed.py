from harness import check_resource, prod

from model_shards_hashed import POLICY


def test_every_shard_hashed_passes():
    assert check_resource(POLICY, prod("model-files")) == []


def test_a_shard_without_sha256_is_a_violation():
    props = prod("model-files")
    del props["shards"][1]["sha256"]
    props["shards"][3]["sha256"] = "TODO"
    messages = check_resource(POLICY, props)
    assert len(messages) == 2
    assert "00002-of-00004" in messages[0] and "00004-of-00004" in messages[1]
    assert all(m.startswith("seed 000 §6.2.1") for m in messages)


def test_an_empty_manifest_is_a_violation():
    props = prod("model-files")
    props["shards"] = []
    [message] = check_resource(POLICY, props)
    assert "no shards" in message
