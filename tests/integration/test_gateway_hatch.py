"""The hatch on real LiteLLM (both pinned versions): the fleet's client errors reach the
developer unchanged and never the frontier; 429, 5xx and no answer escalate, each counted on
/metrics with the fleet's status; a real Prometheus scraping the gateway with the fleet's alert
rules fires the hatch's spend alert once an escalation crosses it. Config-only mode with the
master key: the hatch needs no keys.
"""

import time
import urllib.parse

import pytest

from components.vllm_fleet import alerts, dashboard
from config.types import Alerts, Hatch, Pricing
from localhosts.servers.litellm_venv import TESTED_LITELLM, litellm_venv
from spear.rules import CODER_MODEL, FRONTIER_MODEL
from localhosts.standins.frontier_standin import FrontierStandin
from localhosts.servers.litellm_proxy import ProxyError
from localhosts.standins.openai_upstream import OpenAIUpstream
from localhosts.servers.spear_gateway_proxy import (FRONTIER_KEY, gateway_config, metric,
                                             spear_proxy)
from tests.support.prometheus import prometheus

VERSIONS = dict(zip(TESTED_LITELLM, ((4120, 8150, 8160), (4121, 8151, 8161))))
PROMETHEUS_PORT = 9190
CLIENT_ERRORS = [400, 401, 404, 422]
FLEET_FAILURES = [429, 500, 503, "timeout"]
REQUEST_TIMEOUT = 3
NUM_RETRIES = 2


@pytest.fixture(scope="module", params=list(VERSIONS))
def gateway(request, tmp_path_factory):
    proxy_port, upstream_port, frontier_port = VERSIONS[request.param]
    log_dir = tmp_path_factory.mktemp(f"hatch-{request.param}")
    venv = litellm_venv(request.param)
    with OpenAIUpstream(upstream_port, hang_seconds=REQUEST_TIMEOUT * 3) as upstream, \
            FrontierStandin(frontier_port, FRONTIER_KEY) as frontier:
        # Retries as in production: the fleet is retried before the hatch is considered.
        config = gateway_config(upstream.base_url, frontier.base_url,
                                frontier_prices=(0.0, 0.0001), request_timeout=REQUEST_TIMEOUT,
                                num_retries=NUM_RETRIES)
        with spear_proxy(venv.path, config, port=proxy_port, log_dir=log_dir,
                         hatch_cap_usd=100.0) as proxy:
            print(f"\nlitellm {request.param}: venv {venv.seconds:.1f} s, "
                  f"start {proxy.last_start_seconds:.1f} s")
            yield proxy, upstream, frontier


def ask(proxy, text, model=CODER_MODEL):
    return proxy.post("/v1/chat/completions", {
        "model": model, "max_tokens": 16, "messages": [{"role": "user", "content": text}]},
        timeout=60)


def escalations(proxy):
    return {str(s): metric(proxy, "spear_hatch_escalations_total", status=str(s))
            for s in FLEET_FAILURES}


def test_the_fleet_answers_when_it_can_and_the_frontier_is_not_called(gateway):
    proxy, upstream, frontier = gateway
    before = frontier.calls
    answer = ask(proxy, "hello")
    assert answer["choices"][0]["message"]["content"] == "SPEAR-UPSTREAM-OK"
    assert frontier.calls == before


@pytest.mark.parametrize("status", CLIENT_ERRORS)
def test_a_client_error_reaches_the_developer_unchanged_and_never_the_frontier(gateway, status):
    proxy, upstream, frontier = gateway
    calls, counted = frontier.calls, escalations(proxy)
    with pytest.raises(ProxyError) as refused:
        ask(proxy, f"SPEAR-ANSWER-STATUS={status}")
    assert refused.value.status == status
    message = refused.value.body["error"]["message"]
    assert f"told to answer {status}" in message
    assert FRONTIER_MODEL not in message  # nothing says the hatch was tried (issue 20)
    assert upstream.calls[-1].answered == status
    assert frontier.calls == calls
    assert escalations(proxy) == counted


def test_a_client_error_does_not_take_the_fleet_out_for_the_next_request(gateway):
    proxy, upstream, frontier = gateway
    with pytest.raises(ProxyError):
        ask(proxy, "SPEAR-ANSWER-STATUS=404")
    answer = ask(proxy, "hello")                     # at once: no cooldown of coder
    assert answer["choices"][0]["message"]["content"] == "SPEAR-UPSTREAM-OK"


@pytest.mark.parametrize("status", FLEET_FAILURES)
def test_a_rate_limit_a_server_error_or_no_answer_escalates_to_the_frontier_and_is_counted(
        gateway, status):
    proxy, upstream, frontier = gateway
    calls, counted = frontier.calls, escalations(proxy)
    started = time.monotonic()
    answer = ask(proxy, f"SPEAR-ANSWER-STATUS={status}")
    assert answer["choices"][0]["message"]["content"] == "SPEAR-FRONTIER-OK"
    assert upstream.calls[-1].answered == status
    assert frontier.calls == calls + 1
    assert escalations(proxy) == counted | {str(status): counted[str(status)] + 1}
    if status == "timeout":  # escalated once the gateway's timeouts passed, not after the hang
        assert time.monotonic() - started < REQUEST_TIMEOUT * (NUM_RETRIES + 1) + upstream.hang_seconds


def test_the_frontier_asked_for_directly_is_refused_and_not_called(gateway):
    proxy, upstream, frontier = gateway
    calls = frontier.calls
    with pytest.raises(ProxyError) as refused:
        ask(proxy, "hello", model=FRONTIER_MODEL)
    assert refused.value.status == 403
    assert refused.value.body["error"]["type"] == "hatch_not_direct"
    assert frontier.calls == calls


def test_the_hatch_spend_gauge_shows_what_the_frontier_cost(gateway):
    proxy, upstream, frontier = gateway
    spend = metric(proxy, "spear_hatch_spend_usd")
    ask(proxy, "SPEAR-ANSWER-STATUS=503")
    # 16 output tokens at 0.0001 USD (the stand-in answers 16 tokens, input is free); settled
    # by the success event, which LiteLLM may run just after the answer.
    deadline = time.monotonic() + 10
    while metric(proxy, "spear_hatch_spend_usd") < spend + 0.0016 - 1e-9 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert metric(proxy, "spear_hatch_spend_usd") == pytest.approx(spend + 0.0016)
    assert metric(proxy, "spear_hatch_cap_usd") == 100.0


def test_prometheus_scraping_the_gateway_fires_the_hatch_spend_alert_once_an_escalation_crosses_it(
        gateway, tmp_path):
    proxy, upstream, frontier = gateway
    ask(proxy, "hello")  # the hook opens its ledger, and so exports it, at its first request
    spend = metric(proxy, "spear_hatch_spend_usd")
    # The gateway's hatch with its alert just above today's spend: one escalation (0.0016 USD)
    # crosses it. The fleet's other thresholds are their defaults.
    hatch = Hatch(model="claude-sonnet-4-5", api_base=frontier.base_url, monthly_cap_usd=100.0,
                  alert_usd=spend + 0.001, pricing=Pricing(0.0, 0.0001))
    rules = alerts.render(Alerts(preemptions_per_hour=30, ttft_p95_seconds=2.0,
                                 itl_p95_seconds=0.1, prefix_cache_hit_rate_min=0.3,
                                 hatch_escalations_per_hour=20), "coder-fleet", hatch)
    target = urllib.parse.urlsplit(proxy.base_url).netloc
    scrape = [{"job_name": "spear-gateway", "metrics_path": "/metrics/",
               "authorization": {"credentials": proxy.master_key},
               "static_configs": [{"targets": [target]}]}]
    with prometheus(rules, scrape, PROMETHEUS_PORT, tmp_path) as server:
        deadline = time.monotonic() + 20
        while server.value("spear_hatch_spend_usd") is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert server.targets_up() == [True]
        assert server.value("spear_hatch_spend_usd") == pytest.approx(spend)
        assert "HatchSpendNearCap" not in server.alerts()
        ask(proxy, "SPEAR-ANSWER-STATUS=503")
        deadline = time.monotonic() + 30
        while (server.alerts().get("HatchSpendNearCap") or {}).get("state") != "firing" \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        fired = server.alerts()["HatchSpendNearCap"]
        assert (fired["state"], fired["labels"]["severity"]) == ("firing", "warning")
        assert fired["annotations"]["summary"].endswith("of the 100 USD cap.")
        # The fleet's dashboard: Prometheus takes every query; the hatch's and LiteLLM's own
        # request count have data from this gateway (the fleet's panels need the fleet).
        exprs = [target["expr"] for panel in dashboard.render("coder-fleet")["panels"]
                 for target in panel["targets"]]
        answered = {expr: server.api("query", query=expr)["result"] for expr in exprs}
        assert answered[f"max({alerts.HATCH_SPEND})"]
        assert server.value(f'sum({dashboard.LITELLM_REQUESTS}{{requested_model="coder"}})') > 0


# Each harness's dialect reaches the same hatch: Claude Code's Messages API and Codex's
# Responses API, bridged onto the fleet's chat completions.
DIALECTS = {
    "/v1/messages": lambda text: {"model": CODER_MODEL, "max_tokens": 16,
                                  "messages": [{"role": "user", "content": text}]},
    "/v1/responses": lambda text: {"model": CODER_MODEL, "max_output_tokens": 16, "input": text},
}


@pytest.mark.parametrize("route", DIALECTS)
@pytest.mark.parametrize("status, escalates", [(503, True), (400, False)])
def test_every_dialect_escalates_only_a_fleet_failure(gateway, route, status, escalates):
    proxy, upstream, frontier = gateway
    calls = frontier.calls
    body = DIALECTS[route](f"SPEAR-ANSWER-STATUS={status}")
    if escalates:
        answer = proxy.post(route, body, timeout=60)
        assert "SPEAR-FRONTIER-OK" in str(answer)
    else:
        with pytest.raises(ProxyError) as refused:
            proxy.post(route, body, timeout=60)
        assert refused.value.status == status
        assert FRONTIER_MODEL not in str(refused.value.body)
    assert frontier.calls == calls + (1 if escalates else 0)
    assert upstream.calls[-1].answered == status


# What each harness sends unasked (issue 20): the model has no thinking mode, so the gateway
# serves the request without the ask instead of LiteLLM's 400 UnsupportedParamsError.
THINKING_ASKS = {
    "openhands": ("/v1/chat/completions", {"reasoning_effort": "high", "max_tokens": 16,
                                           "messages": [{"role": "user", "content": "hello"}]}),
    "codex": ("/v1/responses", {"reasoning": {"effort": "medium", "summary": "auto"},
                                "max_output_tokens": 16, "input": "hello"}),
    "claude-code": ("/v1/messages", {"thinking": {"type": "enabled", "budget_tokens": 1024},
                                     "max_tokens": 2048, "output_config": {"effort": "high"},
                                     "messages": [{"role": "user", "content": "hello"}]}),
}


@pytest.mark.parametrize("harness", THINKING_ASKS)
def test_a_harnesss_thinking_ask_is_served_without_it(gateway, harness):
    proxy, upstream, frontier = gateway
    route, body = THINKING_ASKS[harness]
    answer = proxy.post(route, {"model": CODER_MODEL, **body}, timeout=60)
    assert "SPEAR-UPSTREAM-OK" in str(answer)
    sent = upstream.calls[-1].body
    assert not {"reasoning_effort", "reasoning", "thinking"} & set(sent), sent


def test_no_request_is_left_holding_budget_once_answered(gateway):
    proxy, upstream, frontier = gateway
    deadline = time.monotonic() + 10
    while metric(proxy, "spear_requests_in_flight") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert metric(proxy, "spear_requests_in_flight") == 0
