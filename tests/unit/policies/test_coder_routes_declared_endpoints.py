import yaml

from policies.gateway.coder_routes_declared_endpoints import POLICY
from spear import tokens
from tests.support.policy_harness import (PROD_ENDPOINTS, UNKNOWN, check_stack, prod,
                                          prod_stack)

SEED = "seed 001 step 5 (`coder` is the fleet"


def gateway(config=None, tunnel=None):
    return [(tokens.GATEWAY_CONFIG, config or prod(tokens.GATEWAY_CONFIG)),
            (tokens.GATEWAY_TUNNEL, tunnel or prod(tokens.GATEWAY_TUNNEL))]


def with_api_base(api_base: str):
    props = prod(tokens.GATEWAY_CONFIG)
    config = yaml.safe_load(props["content"])
    config["model_list"][0]["litellm_params"]["api_base"] = api_base
    props["content"] = yaml.safe_dump(config)
    return props


def test_routes_to_a_declared_endpoint_through_its_tunnel_pass():
    assert check_stack(POLICY, prod_stack(), gateway(), PROD_ENDPOINTS) == []


def test_an_upstream_the_stack_does_not_declare_is_a_violation():
    [message] = check_stack(POLICY, prod_stack(), gateway(), [])
    assert message.startswith(SEED)
    assert "gateway-config routes coder to 'reds', which the stack does not declare" in message
    assert "Fix: name only declared endpoints in gateway.coder.upstreams (declared: none)" in message


def test_an_upstream_without_its_tunnel_is_a_violation():
    [message] = check_stack(POLICY, prod_stack(), [(tokens.GATEWAY_CONFIG,
                                                    prod(tokens.GATEWAY_CONFIG))], PROD_ENDPOINTS)
    assert "has no spear-tunnel-reds.service reaching it" in message


def test_a_deployment_to_another_host_is_a_violation():
    [message] = check_stack(POLICY, prod_stack(), gateway(with_api_base("https://example.com/v1")),
                            PROD_ENDPOINTS)
    assert "(coder, id 'reds', https://example.com/v1) does not go to 127.0.0.1:8082/v1" in message


def test_a_deployment_to_another_endpoints_port_is_a_violation():
    [message] = check_stack(POLICY, prod_stack(), gateway(with_api_base("http://127.0.0.1:8081/v1")),
                            PROD_ENDPOINTS)
    assert "does not go to 127.0.0.1:8082/v1, where spear-tunnel-reds.service forwards" in message


def test_a_deployment_that_is_no_upstream_is_a_violation():
    props = prod(tokens.GATEWAY_CONFIG)
    config = yaml.safe_load(props["content"])
    config["model_list"][0]["model_info"]["id"] = "elsewhere"
    props["content"] = yaml.safe_dump(config)
    [message] = check_stack(POLICY, prod_stack(), gateway(props), PROD_ENDPOINTS)
    assert "id 'elsewhere'" in message and "is not one of the upstreams (reds)" in message


def test_an_unknown_tunnel_port_cannot_pass():
    tunnel = prod(tokens.GATEWAY_TUNNEL)
    tunnel["health"]["port"] = UNKNOWN
    [message] = check_stack(POLICY, prod_stack(), gateway(tunnel=tunnel), PROD_ENDPOINTS)
    assert "health.port can't be known during preview" in message
