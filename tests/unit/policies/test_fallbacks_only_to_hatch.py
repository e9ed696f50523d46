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


def test_the_rendered_config_with_only_the_hatch_hook_passes():
    assert check_resource(POLICY, tokens.GATEWAY_CONFIG, prod(tokens.GATEWAY_CONFIG)) == []


def test_a_litellm_fallback_even_to_frontier_is_a_violation():
    props = edited(lambda c: c["router_settings"].update(fallbacks=[{"coder": ["frontier"]}]))
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert message.startswith(SEED)
    assert "config.yaml sets router_settings.fallbacks" in message
    assert "fire on 400, 401, 404 and 422 too" in message
    assert "Fix: remove LiteLLM fallbacks" in message


def test_a_default_fallback_in_litellm_settings_is_a_violation():
    props = edited(lambda c: c["litellm_settings"].update(default_fallbacks=["other"]))
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "litellm_settings.default_fallbacks" in message


def test_a_hatch_to_another_model_is_a_violation():
    props = edited(lambda c: c["spear_hatch"].update(to="coder-big"))
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "spear_hatch goes from 'coder' to 'coder-big', not from coder to frontier" in message


def test_a_hatch_on_client_errors_is_a_violation():
    props = edited(lambda c: c["spear_hatch"].update(statuses=["4xx", "5xx"]))
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "escalates on ['4xx', '5xx'], not on 429, 5xx, timeout only" in message


def test_a_config_without_the_hatch_hook_is_a_violation():
    props = edited(lambda c: c["litellm_settings"].update(callbacks=["prometheus"]))
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "lack spear_gateway.litellm_hooks.proxy_handler" in message


def test_an_unknown_config_cannot_pass():
    props = prod(tokens.GATEWAY_CONFIG)
    props["content"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "content can't be known during preview" in message
