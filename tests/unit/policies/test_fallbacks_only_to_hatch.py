import yaml

from policies.gateway.fallbacks_only_to_hatch import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod

SEED = "seed 001 step 5 (the frontier hatch is for 429 and 5xx only"


def edited(change):
    props = prod(tokens.GATEWAY_CONFIG)
    config = yaml.safe_load(props["content"])
    change(config)
    props["content"] = yaml.safe_dump(config)
    return props


def test_the_rendered_config_without_fallbacks_and_with_the_hook_passes():
    assert check_resource(POLICY, tokens.GATEWAY_CONFIG, prod(tokens.GATEWAY_CONFIG)) == []


def test_a_litellm_fallback_even_to_the_hatch_is_a_violation():
    props = edited(lambda c: c["router_settings"].update(fallbacks=[{"coder": ["frontier"]}]))
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert message.startswith(SEED)
    assert ("config.yaml has LiteLLM fallbacks (router_settings.fallbacks:"
            " [{'coder': ['frontier']}]); they fire on 400, 401, 404 and 422 too") in message
    assert "Fix: let spear-fleet render config.yaml" in message


def test_a_default_fallback_is_a_violation():
    props = edited(lambda c: c["litellm_settings"].update(default_fallbacks=["frontier"]))
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "(litellm_settings.default_fallbacks: ['frontier'])" in message


def test_a_config_without_the_hatch_hook_is_a_violation():
    props = edited(lambda c: c["litellm_settings"].update(callbacks=["prometheus"]))
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "does not load spear_gateway.callbacks.proxy_handler_instance" in message
    assert "no budget holds" in message


def test_a_hatch_to_another_model_is_a_violation():
    props = prod(tokens.GATEWAY_CONFIG)
    props["hatch"]["to"] = "coder-big"
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "the gateway's hatch goes from 'coder' to 'coder-big', not from coder to frontier" in message


def test_an_unknown_config_cannot_pass():
    props = prod(tokens.GATEWAY_CONFIG)
    props["content"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "content can't be known during preview" in message
