"""The fleet's Prometheus alert rules, rendered from the typed config (pure).

Seed 001 "How to run it in production" (observability) and "How to maintain it" (budget
hygiene), metric names per vLLM v0.24.0 (`_total` as Prometheus exposes counters):
- preemptions (`vllm:num_preemptions_total`): KV pressure, agents thrash (failure modes);
- TTFT p95 (`vllm:time_to_first_token_seconds` histogram) and ITL p95
  (`vllm:inter_token_latency_seconds`): the latency SLOs;
- prefix-cache hit rate (`vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total`):
  caching is on by default; a falling rate is lost cost (or salts split too finely);
- hatch escalations per hour (the gateway's `spear_hatch_escalations_total`, by `status`): the
  capability gap, plus any escalation of a client error (4xx other than 429), which must never
  happen;
- hatch spend (`spear_hatch_spend_usd`, this month's) at gateway.hatch.alertUsd, below its
  monthlyCapUsd: the hatch is declared once, with the gateway; a fleet without a gateway has no
  hatch, and no hatch rules;
- a budget hold older than the gateway's `coder.requestTimeout`
  (`spear_budget_oldest_hold_seconds`): a client that hangs up is settled at once, so a hold
  that outlives its request was left by a gateway process that died, and holds headroom until
  its TTL charges it.

The engine's series are selected by `model_name` (vLLM labels every metric with the served model
name), so the rules hold whatever labels the scrape configuration adds.
"""

from __future__ import annotations

import yaml

from config.types import Alerts, Hatch

GROUP = "spear-fleet-vllm"
RULES_FILE = "spear-fleet-vllm.rules.yaml"
PREEMPTIONS = "vllm:num_preemptions_total"
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
HATCH_ESCALATIONS = "spear_hatch_escalations_total"
HATCH_SPEND = "spear_hatch_spend_usd"
OLDEST_HOLD = "spear_budget_oldest_hold_seconds"


def _rule(name: str, expr: str, for_: str, severity: str, summary: str) -> dict:
    return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": severity},
            "annotations": {"summary": summary}}


def rules(alerts: Alerts, served_model_name: str, hatch: Hatch | None,
          request_timeout: int | None = None) -> dict:
    """The rule file as a mapping (one group); the hatch's rules with the gateway's hatch, the
    holds' with its request timeout."""
    model = f'model_name="{served_model_name}"'
    return {"groups": [{"name": GROUP, "rules": [
        _rule("VllmPreemptions",
              f"sum(increase({PREEMPTIONS}{{{model}}}[1h])) > {alerts.preemptions_per_hour}",
              "10m", "warning",
              f"More than {alerts.preemptions_per_hour} preemptions in the last hour: KV-cache"
              " pressure; lower --max-model-len or add a replica."),
        _rule("VllmTtftP95High",
              f"histogram_quantile(0.95, sum by (le) (rate({TTFT}_bucket{{{model}}}[5m])))"
              f" > {alerts.ttft_p95_seconds:g}",
              "10m", "warning",
              f"TTFT p95 above {alerts.ttft_p95_seconds:g}s: check priorities and load."),
        _rule("VllmItlP95High",
              f"histogram_quantile(0.95, sum by (le) (rate({ITL}_bucket{{{model}}}[5m])))"
              f" > {alerts.itl_p95_seconds:g}",
              "10m", "warning",
              f"Inter-token latency p95 above {alerts.itl_p95_seconds:g}s: decode is saturated;"
              " check batch size, preemptions and load."),
        _rule("VllmPrefixCacheHitRateLow",
              f"sum(rate({PREFIX_HITS}{{{model}}}[30m])) / sum(rate({PREFIX_QUERIES}{{{model}}}[30m]))"
              f" < {alerts.prefix_cache_hit_rate_min:g}",
              "30m", "info",
              f"Prefix-cache hit rate below {alerts.prefix_cache_hit_rate_min:g}."),
        *(_hatch_rules(alerts, hatch) if hatch else []),
        *([_rule("GatewayHoldStuck", f"max({OLDEST_HOLD}) > {request_timeout}", "1m", "warning",
                 f"A budget hold has outlived the {request_timeout}s request timeout: a gateway"
                 " process died with requests in flight; their holds keep the keys' headroom"
                 " until the hold TTL charges them.")] if request_timeout else []),
    ]}]}


def _hatch_rules(alerts: Alerts, hatch: Hatch) -> list[dict]:
    return [
        _rule("HatchEscalationsHigh",
              f"sum(increase({HATCH_ESCALATIONS}[1h])) > {alerts.hatch_escalations_per_hour}",
              "0m", "warning",
              f"More than {alerts.hatch_escalations_per_hour} escalations to the frontier hatch in"
              " an hour: the owned model may be falling behind the work."),
        _rule("HatchEscalatedClientError",
              f'sum(increase({HATCH_ESCALATIONS}{{status=~"4..",status!="429"}}[1h])) > 0',
              "0m", "critical",
              "A client error (4xx other than 429) escalated to the hatch: escalation must trigger"
              " on 429 and 5xx only."),
        _rule("HatchSpendNearCap",
              f"max({HATCH_SPEND}) >= {hatch.alert_usd:g}",
              "0m", "warning",
              f"Hatch spend this month reached {hatch.alert_usd:g} USD of the"
              f" {hatch.monthly_cap_usd:g} USD cap."),
    ]


def render(alerts: Alerts, served_model_name: str, hatch: Hatch | None,
           request_timeout: int | None = None) -> str:
    """The rule file's text, as `promtool check rules` and Prometheus read it."""
    return yaml.safe_dump(rules(alerts, served_model_name, hatch, request_timeout),
                          sort_keys=False, width=200)
