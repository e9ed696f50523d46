"""The hooks read what components/gateway/render.py writes: the coder deployments' spear_* model_info
and SPEAR_CACHE_SALT_SCOPE, taken from a rendered config.yaml."""

import pytest
import yaml

from components.gateway.render import Route, render_config
from config.load import parse_stack
from spear.rules import CODER_MODEL
from spear_gateway.settings import Settings
from spear_gateway.tenancy import model_info, ring_deployments, stamp
from tests.support.config_cases import gateway_raw

FLEET = "http://vllm.vllm.svc.cluster.local:8000/v1"
ROUTES = [Route("vllm-stable", FLEET, "qwen3-coder-next", True, track="stable", cache_salt=True,
                priority=True),
          Route("vllm-canary", FLEET, "qwen3-coder-next", True, track="canary", cache_salt=True),
          Route.tunnel("local", 8082, "coder.gguf", False)]


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load(render_config(parse_stack(gateway_raw()).gateway, ROUTES, "developer"))


def coder(config):
    return {model_info(d)["id"]: d for d in config["model_list"] if d["model_name"] == CODER_MODEL}


def test_rings_split_the_rendered_fleet_by_track(config):
    deployments = list(coder(config).values())
    assert [model_info(d)["id"] for d in ring_deployments("pilot", deployments)] == ["vllm-canary"]
    assert [model_info(d)["id"] for d in ring_deployments("general", deployments)] == [
        "vllm-stable", "local"]


def test_each_rendered_deployment_gets_exactly_the_fields_it_takes(config):
    got = {}
    for name, deployment in coder(config).items():
        request = {"cache_salt": "mine", "priority": 0}
        stamp(request, model_info(deployment), "salt", 10)
        got[name] = request
    assert got == {"vllm-stable": {"cache_salt": "salt", "priority": 10},
                   "vllm-canary": {"cache_salt": "salt"}, "local": {}}


def test_the_hooks_settings_accept_the_rendered_scope(config):
    env = {"SPEAR_HATCH_MONTHLY_CAP_USD": "1", **config["environment_variables"]}
    assert Settings.from_environment(env).cache_salt_scope == "developer"
