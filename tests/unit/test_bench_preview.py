"""scripts/bench-preview's stacks: the reference fleet is a valid stack of the project (so a config
change cannot quietly shrink what is measured), and the floor is counted like the reference."""

from pathlib import Path

from config.load import parse_stack
from localhosts.bench import bench_preview
from tests.support.stack_files import stack_raw

KEYS = [Path(f"/tmp/id_ed25519_{i}") for i in range(bench_preview.HOSTS + 1)]


def test_the_reference_fleet_parses_with_three_hosts_the_gateway_and_every_developer():
    raw = bench_preview.reference_config(200, KEYS)
    config = parse_stack({**raw, "gatewayMasterKey": "m", "frontierApiKey": "f",
                    "gatewayBackupKey": bench_preview.BACKUP_KEY})
    assert sorted(config.inference_hosts) == ["llama-1", "llama-2", "llama-3"]
    assert config.gateway.upstreams == ("llama-1", "llama-2", "llama-3")
    assert len(config.developers) == 200
    assert len({developer.max_budget for developer in config.developers.values()}) == 200


def test_the_reference_copies_the_local_stacks_host_and_gateway():
    local = stack_raw("local")
    raw = bench_preview.reference_config(1, KEYS)
    host = raw["inferenceHosts"]["llama-2"]
    assert host["model"] == local["inferenceHosts"]["local"]["model"]
    assert host["ssh"]["privateKeyPath"] == str(KEYS[1])
    assert raw["gateway"]["litellm"] == local["gateway"]["litellm"]
    assert raw["gateway"]["ssh"]["privateKeyPath"] == str(KEYS[-1])


def test_the_stack_and_providers_are_not_counted_as_registered_resources():
    steps = [{"urn": "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"},
             {"urn": "urn:pulumi:s::p::pulumi:providers:pulumi-python::default::1"},
             {"urn": "urn:pulumi:s::p::spear:gateway:Gateway::gateway"},
             {"urn": "urn:pulumi:s::p::spear:gateway:Gateway$pulumi-python:dynamic/spear:GatewayKey::k"}]
    assert bench_preview.registered(steps) == 2
