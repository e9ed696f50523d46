import json

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


def with_fleet_route(track: str, api_base: str):
    """prod's config with a route to the fleet's `track` beside the inference host's."""
    props = prod(tokens.GATEWAY_CONFIG)
    config = yaml.safe_load(props["content"])
    route = {**config["model_list"][0], "model_info": {"id": f"vllm-{track}", "spear_track": track}}
    route["litellm_params"] = {**route["litellm_params"], "api_base": api_base}
    config["model_list"].insert(1, route)
    props["content"] = yaml.safe_dump(config)
    props["upstreams"] = [*props["upstreams"], "vllmFleet"]
    return props


def fleet_service(track: str, ip: str = "10.96.100.10", port: float = 8000.0):
    return (tokens.K8S_SERVICE, {"metadata": {"name": "vllm", "labels": {"app": "vllm", "track": track}},
                                 "spec": {"clusterIP": ip, "ports": [{"port": port}]}}, f"vllm-{track}-service")


FLEET = [*PROD_ENDPOINTS, (tokens.VLLM_FLEET, "vllm")]


def test_a_route_to_the_fleets_service_at_its_cluster_ip_passes():
    config = with_fleet_route("stable", "http://10.96.100.10:8000/v1")
    assert check_stack(POLICY, prod_stack(), [*gateway(config), fleet_service("stable")], FLEET) == []


def test_a_fleet_route_to_another_address_is_a_violation():
    config = with_fleet_route("stable", "http://10.96.100.99:8000/v1")
    [message] = check_stack(POLICY, prod_stack(), [*gateway(config), fleet_service("stable")], FLEET)
    assert ("(coder, id 'vllm-stable', http://10.96.100.99:8000/v1) does not go to the fleet's stable"
            " Service (at http://10.96.100.10:8000/v1)") in message


def test_a_route_to_the_canary_needs_the_canarys_own_service():
    config = with_fleet_route("canary", "http://10.96.100.10:8000/v1")
    [message] = check_stack(POLICY, prod_stack(), [*gateway(config), fleet_service("stable")], FLEET)
    assert "does not go to the fleet's canary Service (at none in the stack)" in message


def test_routing_to_the_fleet_without_a_fleet_in_the_stack_is_a_violation():
    config = with_fleet_route("stable", "http://10.96.100.10:8000/v1")
    [message] = check_stack(POLICY, prod_stack(), [*gateway(config), fleet_service("stable")], PROD_ENDPOINTS)
    assert "routes coder to 'vllmFleet', which the stack does not declare" in message


def test_an_unknown_cluster_ip_cannot_pass():
    config = with_fleet_route("stable", "http://10.96.100.10:8000/v1")
    [message] = check_stack(POLICY, prod_stack(), [*gateway(config), fleet_service("stable", UNKNOWN)], FLEET)
    assert "can't be known during preview" in message


def in_cluster(api_base: str):
    """The gateway ConfigMap of a gateway in the cluster, routing coder to the fleet only."""
    props = with_fleet_route("stable", api_base)
    config = yaml.safe_load(props["content"])
    config["model_list"] = config["model_list"][1:]  # no inference host: the fleet only
    facts = {"upstreams": ["vllmFleet"], "litellm_version": props["litellm_version"],
             "hatch": props["hatch"]}
    return (tokens.K8S_CONFIG_MAP, {
        "metadata": {"name": "spear-gateway-config",
                     "labels": {"app.kubernetes.io/name": "spear-gateway"},
                     "annotations": {"spear-fleet/facts": json.dumps(facts)}},
        "data": {"config.yaml": yaml.safe_dump(config)}}, "gateway-config")


def test_the_cluster_gateways_route_to_the_fleets_service_passes_and_another_address_does_not():
    assert check_stack(POLICY, prod_stack(), [in_cluster("http://10.96.100.10:8000/v1"),
                                              fleet_service("stable")], FLEET) == []
    [message] = check_stack(POLICY, prod_stack(), [in_cluster("http://10.96.100.99:8000/v1"),
                                                   fleet_service("stable")], FLEET)
    assert "does not go to the fleet's stable Service" in message
