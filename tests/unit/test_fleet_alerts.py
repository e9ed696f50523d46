"""The fleet's alert rules (components/vllm_fleet/alerts.py): valid for Prometheus, as
`promtool check rules` says, and firing on the series they watch, as `promtool test rules`
evaluates them; the thresholds are the stack's, the hatch's the gateway's (declared once).
Set-up installs promtool (Debian's prometheus package): these tests require it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.vllm_fleet import alerts
from config.load import parse_stack
from config.types import Hatch, Pricing
from tests.support.config_cases import fleet_raw

MODEL = "qwen3-coder-next"
# The gateway's hatch: a 500 USD monthly cap, its spend alert at 400.
HATCH = Hatch(model="claude-sonnet-4-5", api_base="https://api.anthropic.com",
              monthly_cap_usd=500.0, alert_usd=400.0, pricing=Pricing(3e-6, 15e-6))
TIMEOUT = 600  # the gateway's coder.requestTimeout: the holds' alert


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    fleet = parse_stack(fleet_raw()).vllm_fleet
    path = tmp_path / alerts.RULES_FILE
    path.write_text(alerts.render(fleet.alerts, fleet.vllm.served_model_name, HATCH, TIMEOUT))
    return path


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    assert shutil.which("promtool"), "promtool is missing: scripts/setup.sh installs it"
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True)


def annotations(name: str) -> dict:
    fleet = parse_stack(fleet_raw()).vllm_fleet
    [rule] = [r for r in alerts.rules(fleet.alerts, MODEL, HATCH, TIMEOUT)["groups"][0]["rules"]
              if r["alert"] == name]
    return rule["annotations"]


def test_promtool_accepts_the_rendered_rules(rules_file):
    result = promtool("check", "rules", rules_file.name, cwd=rules_file.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_the_thresholds_are_the_stacks_and_the_hatchs_are_the_gateways():
    fleet = parse_stack(fleet_raw(observability={"preemptionsPerHour": 7})).vllm_fleet
    hatch = Hatch(**{**HATCH.__dict__, "monthly_cap_usd": 900.0, "alert_usd": 600.0})
    by_name = {r["alert"]: r["expr"] for r in alerts.rules(fleet.alerts, MODEL, hatch)["groups"][0]["rules"]}
    assert by_name["HatchSpendNearCap"] == "max(spear_hatch_spend_usd) >= 600"
    assert by_name["VllmPreemptions"] == (
        'sum(increase(vllm:num_preemptions_total{model_name="qwen3-coder-next"}[1h])) > 7')


def _alert_test(series: list[dict], alertname: str, eval_time: str, fires: bool) -> dict:
    expected = [{"exp_labels": {"severity": _severity(alertname)},
                 "exp_annotations": annotations(alertname)}] if fires else []
    return {"interval": "1m", "input_series": series,
            "alert_rule_test": [{"eval_time": eval_time, "alertname": alertname,
                                 "exp_alerts": expected}]}


def _severity(name: str) -> str:
    fleet = parse_stack(fleet_raw()).vllm_fleet
    return next(r["labels"]["severity"] for r in alerts.rules(fleet.alerts, MODEL, HATCH, TIMEOUT)["groups"][0]["rules"]
                if r["alert"] == name)


def test_the_rules_fire_on_the_series_they_watch_and_stay_quiet_below_their_thresholds(rules_file):
    hits = f'vllm:prefix_cache_hits_total{{model_name="{MODEL}"}}'
    queries = f'vllm:prefix_cache_queries_total{{model_name="{MODEL}"}}'
    tests = [
        # 400 USD is the gateway's hatch alert (its cap 500): 410 fires, 390 does not.
        _alert_test([{"series": "spear_hatch_spend_usd", "values": "350 390 410"}],
                    "HatchSpendNearCap", "2m", fires=True),
        _alert_test([{"series": "spear_hatch_spend_usd", "values": "350 380 390"}],
                    "HatchSpendNearCap", "2m", fires=False),
        # One 400 escalated in the hour: critical, whatever the rate.
        _alert_test([{"series": 'spear_hatch_escalations_total{status="400"}', "values": "0 0 1"},
                     {"series": 'spear_hatch_escalations_total{status="429"}', "values": "0 5 9"}],
                    "HatchEscalatedClientError", "2m", fires=True),
        _alert_test([{"series": 'spear_hatch_escalations_total{status="429"}', "values": "0 5 9"},
                     {"series": 'spear_hatch_escalations_total{status="503"}', "values": "0 1 2"}],
                    "HatchEscalatedClientError", "2m", fires=False),
        # 30 escalations an hour against a threshold of 20.
        _alert_test([{"series": 'spear_hatch_escalations_total{status="503"}', "values": "0+1x60"}],
                    "HatchEscalationsHigh", "60m", fires=True),
        # Hit rate 0.1 for an hour, below 0.3 for longer than the rule's 30m.
        _alert_test([{"series": hits, "values": "0+6x70"}, {"series": queries, "values": "0+60x70"}],
                    "VllmPrefixCacheHitRateLow", "70m", fires=True),
        _alert_test([{"series": hits, "values": "0+30x70"}, {"series": queries, "values": "0+60x70"}],
                    "VllmPrefixCacheHitRateLow", "70m", fires=False),
        # A hold older than the 600 s request timeout (a gateway process lost with it in flight);
        # holds that come and go under it stay quiet.
        _alert_test([{"series": "spear_budget_oldest_hold_seconds", "values": "0+60x15"}],
                    "GatewayHoldStuck", "13m", fires=True),
        _alert_test([{"series": "spear_budget_oldest_hold_seconds", "values": "30 400 20 590 10"}],
                    "GatewayHoldStuck", "4m", fires=False),
        # One preemption a minute: 60 an hour, over 30.
        _alert_test([{"series": f'vllm:num_preemptions_total{{model_name="{MODEL}"}}',
                      "values": "0+1x80"}], "VllmPreemptions", "80m", fires=True),
        # Every first token in the 5s bucket: p95 above 2s.
        _alert_test([{"series": f'vllm:time_to_first_token_seconds_bucket{{model_name="{MODEL}",le="1"}}',
                      "values": "0x30"},
                     {"series": f'vllm:time_to_first_token_seconds_bucket{{model_name="{MODEL}",le="5"}}',
                      "values": "0+10x30"},
                     {"series": f'vllm:time_to_first_token_seconds_bucket{{model_name="{MODEL}",le="+Inf"}}',
                      "values": "0+10x30"}],
                    "VllmTtftP95High", "30m", fires=True),
        # Every token after the first in the 0.25s bucket: ITL p95 above 0.1s; in 0.05s: below.
        *(_alert_test([{"series": f'vllm:inter_token_latency_seconds_bucket{{model_name="{MODEL}",le="{le}"}}',
                        "values": values} for le, values in buckets],
                      "VllmItlP95High", "30m", fires=fires)
          for buckets, fires in (
              ((("0.05", "0x30"), ("0.25", "0+100x30"), ("+Inf", "0+100x30")), True),
              ((("0.05", "0+100x30"), ("0.25", "0+100x30"), ("+Inf", "0+100x30")), False))),
    ]
    (rules_file.parent / "tests.yaml").write_text(yaml.safe_dump(
        {"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": tests}))
    result = promtool("test", "rules", "tests.yaml", cwd=rules_file.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_a_fleet_without_a_gateway_has_no_hatch_and_no_hatch_rules():
    fleet = parse_stack(fleet_raw()).vllm_fleet
    names = [r["alert"] for r in alerts.rules(fleet.alerts, MODEL, None)["groups"][0]["rules"]]
    assert names == ["VllmPreemptions", "VllmTtftP95High", "VllmItlP95High",
                     "VllmPrefixCacheHitRateLow"]
