"""The gateway rules read the gateway's config wherever it runs: in the cluster it is the gateway
ConfigMap's config.yaml with its facts as an annotation (policies/common.py::gateway_config_view),
checked like the gateway host's config file, and a gateway ConfigMap without its facts fails
closed."""

import json

import yaml

from policies.gateway.fallbacks_only_to_hatch import POLICY as FALLBACKS
from policies.gateway.gateway_secrets_only_as_secrets import POLICY as SECRETS
from policies.gateway.hatch_alert_below_cap import POLICY as HATCH_ALERT
from spear import tokens
from tests.support.policy_harness import check_resource, prod


def config_map(content: str | None = None, facts: dict | None = None, app: str = "spear-gateway"):
    """The gateway ConfigMap as components/gateway/cluster.py registers it, from prod's config."""
    host = prod(tokens.GATEWAY_CONFIG)
    facts = {k: host[k] for k in ("upstreams", "litellm_version", "hatch")} if facts is None \
        else facts
    return {"metadata": {"name": "spear-gateway-config", "namespace": "spear-gateway",
                         "labels": {"app.kubernetes.io/name": app},
                         "annotations": {"spear-fleet/facts": json.dumps(facts)} if facts else {}},
            "data": {"config.yaml": content or host["content"], "proofs.json": "[]"}}


def check(policy, props):
    return check_resource(policy, tokens.K8S_CONFIG_MAP, props, secret_outputs=[])


def test_the_cluster_gateways_config_passes_the_rules_the_hosts_config_passes():
    for policy in (FALLBACKS, SECRETS, HATCH_ALERT):
        assert check(policy, config_map()) == []


def test_a_fallback_in_the_cluster_gateways_config_is_refused():
    config = yaml.safe_load(prod(tokens.GATEWAY_CONFIG)["content"])
    config["router_settings"]["fallbacks"] = [{"coder": ["frontier"]}]
    [message] = check(FALLBACKS, config_map(yaml.safe_dump(config)))
    assert "config.yaml has LiteLLM fallbacks (router_settings.fallbacks:" in message


def test_a_master_key_written_into_the_cluster_gateways_config_is_refused():
    config = yaml.safe_load(prod(tokens.GATEWAY_CONFIG)["content"])
    config["general_settings"]["master_key"] = "sk-in-clear"
    [message] = check(SECRETS, config_map(yaml.safe_dump(config)))
    assert "config.yaml holds general_settings.master_key as a value" in message


def test_a_gateway_config_map_without_its_facts_fails_closed():
    assert check(HATCH_ALERT, config_map(facts={})) != []
    assert check(FALLBACKS, config_map(facts={})) != []


def test_another_config_map_is_not_the_gateways():
    config = yaml.safe_load(prod(tokens.GATEWAY_CONFIG)["content"])
    config["router_settings"]["fallbacks"] = [{"coder": ["frontier"]}]
    assert check(FALLBACKS, config_map(yaml.safe_dump(config), app="vllm")) == []
