"""The gateway's pure renderers (components/gateway/render.py): LiteLLM's config.yaml, the env
file, the spear-gateway unit and the tunnel units, from the typed config of prod's gateway
example and the local stack's."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from components.gateway.render import (DATABASE_URL_ENV, DEFAULT_MAX_TOKENS, FRONTIER_KEY_ENV,
                                       MASTER_KEY_ENV, Route, coder_window, hatch_outputs,
                                       render_config, render_env, render_tunnel_unit, render_unit,
                                       upstream_key_env, upstream_windows)
from config.load import parse_stack
from config.types import EXTERNAL_DATABASE, OFFLINE_ENGINE, GatewayDatabase, Hatch, Pricing
from spear.rules import (CODER_MODEL, FRONTIER_MODEL, GATEWAY_UNIT, HATCH_CALLBACK,
                         RECEIPT_CALLBACK, SYSTEM_SLICE)
from spear.harness import Window
from tests.support.config_cases import FRONTIER_KEY, MASTER_KEY, changed, gateway_raw, reds_raw
from tests.support.stack_files import stack_raw

MODEL = "/opt/spear/models/gguf/Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf"
GATEWAY = parse_stack(gateway_raw()).gateway
ROUTES = [Route.tunnel("reds", 8082, MODEL, False), Route.tunnel("gpu", 8081, "qwen3-coder-next", True)]


def rendered(gateway=GATEWAY, routes=ROUTES) -> dict:
    return yaml.safe_load(render_config(gateway, routes))


def models(config: dict, name: str) -> list[dict]:
    return [m for m in config["model_list"] if m["model_name"] == name]


def test_coder_routes_each_upstream_through_its_tunnel_port():
    coder = models(rendered(), CODER_MODEL)
    assert [(m["model_info"]["id"], m["litellm_params"]["api_base"], m["litellm_params"]["model"])
            for m in coder] == [("reds", "http://127.0.0.1:8082/v1", f"openai/{MODEL}"),
                                ("gpu", "http://127.0.0.1:8081/v1", "openai/qwen3-coder-next")]
    # llama-server demands no key; the pod's vLLM key comes from the env file.
    assert [m["litellm_params"]["api_key"] for m in coder] == [
        "none", f"os.environ/{upstream_key_env('gpu')}"]
    assert upstream_key_env("gpu-b") == "SPEAR_UPSTREAM_KEY_GPU_B"
    # Budgets are priced with these.
    assert coder[0]["litellm_params"]["input_cost_per_token"] == pytest.approx(0.5e-6)
    assert coder[0]["litellm_params"]["output_cost_per_token"] == pytest.approx(2.0e-6)


def test_frontier_is_the_hatch_provider_with_its_key_from_the_environment():
    [frontier] = models(rendered(), FRONTIER_MODEL)
    assert frontier["litellm_params"] == {"model": "anthropic/claude-sonnet-4-5",
                                          "api_base": "https://api.anthropic.com",
                                          "api_key": f"os.environ/{FRONTIER_KEY_ENV}",
                                          # the hatch's cap is counted at the provider's price
                                          "input_cost_per_token": pytest.approx(3.0e-6),
                                          "output_cost_per_token": pytest.approx(15.0e-6)}
    assert [m["model_name"] for m in rendered()["model_list"]] == [CODER_MODEL, CODER_MODEL,
                                                                   FRONTIER_MODEL]


def test_no_secret_text_anywhere_in_config_yaml():
    text = render_config(GATEWAY, ROUTES)
    for secret in (MASTER_KEY, FRONTIER_KEY, "PLACEHOLDER", "BEGIN OPENSSH"):
        assert secret not in text
    general = rendered()["general_settings"]
    assert general == {"master_key": f"os.environ/{MASTER_KEY_ENV}",
                       "database_url": f"os.environ/{DATABASE_URL_ENV}",
                       "enforce_fallback_model_access": False,
                       "disable_budget_reservation": True,
                       "cancel_on_disconnect": True}


def test_a_coder_error_names_no_fallback_the_hatch_never_tried():
    # LiteLLM appends "Available Model Group Fallbacks=['frontier']" and the hatch's refusal of
    # a client error to the developer's message unless told not to (issue 20).
    assert rendered()["litellm_settings"]["expose_router_debug_in_errors"] is False


def test_budget_exceeded_answers_429_and_responses_are_bridged():
    config = rendered()
    assert config["litellm_settings"]["budget_exceeded_status_code"] == 429
    assert all(m["litellm_params"]["use_chat_completions_api"] is True
               for m in models(config, CODER_MODEL))
    assert config["litellm_settings"]["use_chat_completions_url_for_anthropic_messages"] is True
    assert (config["router_settings"]["num_retries"],
            config["litellm_settings"]["request_timeout"]) == (2, 600)
    # One developer's client error must not put the fleet in cooldown for everyone.
    assert config["router_settings"]["disable_cooldowns"] is True


def test_no_litellm_fallback_is_rendered_the_hatch_hook_escalates():
    config = rendered()
    # LiteLLM's fallbacks fire on any error; the hook gives coder its hatch on 429/5xx only.
    assert not any("fallbacks" in key for section in ("router_settings", "litellm_settings")
                   for key in config[section])
    assert config["litellm_settings"]["callbacks"] == [HATCH_CALLBACK, RECEIPT_CALLBACK, "prometheus"]
    assert config["environment_variables"] == {"SPEAR_HATCH_MONTHLY_CAP_USD": "200.0",
                                               "SPEAR_FLEET_MODEL": CODER_MODEL,
                                               "SPEAR_HATCH_MODEL": FRONTIER_MODEL,
                                               "SPEAR_DEFAULT_MAX_TOKENS": "4096",
                                               # 3 tries of the fleet and the hatch's, of
                                               # 600 s each, and 60 s: not an hour
                                               "SPEAR_HOLD_TTL_SECONDS": "2460",
                                               "SPEAR_CACHE_SALT_SCOPE": "team"}


def test_the_hooks_ledger_holds_the_budgets_and_litellms_own_reservation_is_off():
    # LiteLLM's reservation leaks when a client hangs up after a chunk (issue 40): 429s for
    # a developer who spent nothing. The hooks' holds are settled on a hang-up too.
    assert rendered()["general_settings"]["disable_budget_reservation"] is True
    # A client gone before a plain answer cancels the fleet's call, and is settled at its prompt.
    assert rendered()["general_settings"]["cancel_on_disconnect"] is True


def test_a_config_change_changes_the_text_and_nothing_else_does():
    same = render_config(GATEWAY, ROUTES)
    assert render_config(GATEWAY, ROUTES) == same
    assert render_config(dataclasses.replace(GATEWAY, num_retries=3), ROUTES) != same


def test_the_env_file_quotes_each_value_for_systemd():
    text = render_env({MASTER_KEY_ENV: MASTER_KEY, FRONTIER_KEY_ENV: FRONTIER_KEY})
    assert text.splitlines()[1:] == [f'{MASTER_KEY_ENV}="{MASTER_KEY}"',
                                     f'{FRONTIER_KEY_ENV}="{FRONTIER_KEY}"']


@pytest.mark.parametrize("value", ['sk-"quoted"', "sk-line\nINJECTED=1", "sk-$HOME", "sk-\\n"])
def test_the_env_file_refuses_values_systemd_would_read_otherwise(value):
    with pytest.raises(ValueError) as error:
        render_env({MASTER_KEY_ENV: value})
    assert "cannot go in an env file" in str(error.value)
    assert value not in str(error.value)


def test_the_unit_runs_the_pinned_venv_on_config_yaml_after_its_tunnels_and_database():
    unit = render_unit(GATEWAY, ["spear-tunnel-reds.service"])
    assert f"Slice={SYSTEM_SLICE}" in unit
    assert ("ExecStart=/opt/spear-gateway/venv/bin/litellm --config"
            " /opt/spear-gateway/config/config.yaml --host 127.0.0.1 --port 4000") in unit
    assert ("After=network-online.target spear-tunnel-reds.service postgresql@15-spear.service"
            in unit)
    assert "EnvironmentFile=/opt/spear-gateway/config/gateway.env" in unit
    # The hook package beside config.yaml is importable.
    assert "Environment=PYTHONPATH=/opt/spear-gateway/config" in unit
    # The native engine needs no environment of its own; the offline one is named.
    assert "PRISMA_QUERY_ENGINE_BINARY" not in unit
    assert "${" not in unit and GATEWAY_UNIT.removesuffix(".service") in unit


def test_the_offline_engine_and_an_external_database_change_the_unit():
    gateway = dataclasses.replace(GATEWAY, database=GatewayDatabase(
        location=EXTERNAL_DATABASE, port=5432, query_engine=OFFLINE_ENGINE))
    unit = render_unit(gateway, [])
    assert "postgresql@" not in unit
    assert ("Environment=PRISMA_QUERY_ENGINE_BINARY=/opt/spear-gateway/engine/query-engine"
            in unit)


def test_the_tunnel_unit_forwards_the_client_port_to_the_endpoints_server():
    unit = render_tunnel_unit(GATEWAY, "reds", "reds.internal", 22, "root", "127.0.0.1", 8010, 8082)
    assert unit.startswith("# spear-tunnel-reds.service: generated by spear-fleet")
    assert f"Slice={SYSTEM_SLICE}" in unit
    assert ("-i /opt/spear-gateway/tunnels/reds.key -p 22 -L 127.0.0.1:8082:127.0.0.1:8010"
            " root@reds.internal") in unit
    assert "ExitOnForwardFailure=yes" in unit and "Restart=always" in unit
    assert "${" not in unit



def test_the_hatchs_outputs_name_the_provider_limit_at_the_cap():
    out = hatch_outputs(Hatch(model="claude-sonnet-4-5", api_base="https://api.anthropic.com",
                              monthly_cap_usd=200.0, alert_usd=150.0, pricing=Pricing(3e-6, 15e-6)))
    assert (out["monthly_cap_usd"], out["alert_usd"]) == (200.0, 150.0)
    assert out["provider_limit"] == ("set the monthly spend limit of frontierApiKey's account at"
                                     " https://api.anthropic.com to 200 USD (it cannot be set"
                                     " from here)")


def over_reds_endpoints(*upstreams: str) -> dict:
    """prod's gateway over its two REDS endpoints (`near` is the managed host's server, `box`
    one started by hand), coder routing to `upstreams`."""
    raw = {**reds_raw(), **{k: v for k, v in gateway_raw().items() if k not in reds_raw()}}
    raw["sshPrivateKeys"]["gateway"] = raw["sshPrivateKeys"]["box"] = \
        gateway_raw()["sshPrivateKeys"]["gateway"]
    return changed(raw, ("gateway", "coder", "upstreams"), list(upstreams))


def test_the_served_window_is_the_smallest_per_request_window_among_coders_upstreams():
    raw = stack_raw("local")
    raw = changed(raw, ("inferenceHosts", "local", "server", "ctxSize"), 8192)
    raw = changed(raw, ("inferenceHosts", "local", "server", "parallel"), 2)
    raw = changed(raw, ("vllmFleet", "maxModelLen"), 32768)
    cfg = parse_stack(raw)
    # llama-server splits its window among its slots; vLLM serves max_model_len per request.
    assert upstream_windows(cfg) == {"local": 4096, "vllmFleet": 32768}
    assert coder_window(cfg) == Window(context=4096, max_output=1024)


def test_the_output_limit_is_the_gateways_default_once_the_window_is_four_times_it():
    cfg = parse_stack(over_reds_endpoints("near"))
    assert upstream_windows(cfg) == {"near": 524288}  # prod's managed host: ctx 524288, 1 slot
    assert coder_window(cfg) == Window(context=524288, max_output=DEFAULT_MAX_TOKENS)


def test_a_reds_server_started_by_hand_has_no_window_the_stack_knows():
    assert upstream_windows(parse_stack(over_reds_endpoints("near", "box")))["box"] is None
    assert coder_window(parse_stack(over_reds_endpoints("near", "box"))).context == 524288
    assert coder_window(parse_stack(over_reds_endpoints("box"))) is None
