"""The fleet's Grafana dashboard, rendered from the same metric names as the alert rules (pure).

The cookbook's observability table ("How to run it in production") as panels: spend per
developer and per team and tokens (the gateway's exporter, spear_gateway/exporter.py), the
hatch's escalation rate and share of `coder` traffic, its month's spend against the cap, TTFT
and ITL p95 (vLLM's histograms) and TTFT p95 per stamped priority (the gateway's), the
prefix-cache hit rate and preemptions, and diff acceptance per team: the share of edit decisions
accepted among those harnesses reported to the gateway (spear_gateway/edits.py; Claude Code is
the harness that reports them).

Shipped as a ConfigMap labelled `grafana_dashboard: "1"`, which Grafana's dashboard sidecar loads.
"""

from __future__ import annotations

import json
import re
from typing import Any

from components.vllm_fleet import alerts

UID = "spear-fleet"
FILE = "spear-fleet-dashboard.json"
# The gateway's exporter's and hook's names (spear_gateway/exporter.py, metrics.py; the program
# does not load the hook package, so tests/unit/test_fleet_dashboard.py holds them equal).
DEVELOPER_SPEND = "spear_developer_spend_usd"
DEVELOPER_BUDGET = "spear_developer_budget_usd"
DEVELOPER_TOKENS = "spear_developer_tokens_total"
HATCH_CAP = "spear_hatch_cap_usd"
FLEET_TTFT = "spear_fleet_ttft_seconds"  # the gateway's, by the priority it stamped
EDIT_DECISIONS = "spear_edit_decisions_total"  # the gateway's, from the harnesses' reports
# LiteLLM's own request counter (its `prometheus` callback), by model group.
LITELLM_REQUESTS = "litellm_proxy_total_requests_metric_total"
# What the queries call besides metrics.
PROMQL_FUNCTIONS = {"sum", "max", "rate", "increase", "histogram_quantile"}
_NOT_A_NAME = re.compile(r"by \([^)]*\)|\{[^}]*\}|\[[^\]]*\]|\"[^\"]*\"")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _panel(title: str, exprs: dict[str, str], unit: str, grid: tuple[int, int, int, int]
           ) -> dict[str, Any]:
    x, y, w, h = grid
    return {"type": "timeseries", "title": title, "datasource": {"uid": "${datasource}"},
            "gridPos": {"x": x, "y": y, "w": w, "h": h},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
                        for i, (legend, expr) in enumerate(exprs.items())]}


def render(served_model_name: str) -> dict[str, Any]:
    model = f'model_name="{served_model_name}"'
    q95 = "histogram_quantile(0.95, sum by (le) (rate({}_bucket{{" + model + "}}[5m])))"
    panels = [
        _panel("Spend per developer (budget window)", {
            "{{developer}}": f"sum by (developer) ({DEVELOPER_SPEND})",
            "budget {{developer}}": f"max by (developer) ({DEVELOPER_BUDGET})"},
            "currencyUSD", (0, 0, 12, 8)),
        _panel("Spend per team", {"{{team}}": f"sum by (team) ({DEVELOPER_SPEND})"},
               "currencyUSD", (12, 0, 12, 8)),
        _panel("Tokens per team", {"{{team}} {{kind}}":
                                   f"sum by (team, kind) (rate({DEVELOPER_TOKENS}[5m]))"},
               "short", (0, 8, 12, 8)),
        _panel("Hatch escalations", {
            "per hour": f"sum(increase({alerts.HATCH_ESCALATIONS}[1h]))",
            "share of coder requests": f"sum(rate({alerts.HATCH_ESCALATIONS}[1h])) / "
                                       f'sum(rate({LITELLM_REQUESTS}{{requested_model="coder"}}[1h]))'},
            "short", (12, 8, 12, 8)),
        _panel("Hatch spend this month", {"spend": f"max({alerts.HATCH_SPEND})",
                                          "cap": f"max({HATCH_CAP})"},
               "currencyUSD", (0, 16, 12, 8)),
        _panel("Latency p95", {"TTFT": q95.format(alerts.TTFT), "ITL": q95.format(alerts.ITL)},
               "s", (12, 16, 12, 8)),
        _panel("TTFT p95 by priority (at the gateway)", {
            "priority {{priority}}": "histogram_quantile(0.95, sum by (le, priority)"
                                     f" (rate({FLEET_TTFT}_bucket[5m])))"},
            "s", (0, 32, 12, 8)),
        _panel("Prefix-cache hit rate", {
            "hit rate": f"sum(rate({alerts.PREFIX_HITS}{{{model}}}[30m])) / "
                        f"sum(rate({alerts.PREFIX_QUERIES}{{{model}}}[30m]))"},
            "percentunit", (0, 24, 12, 8)),
        _panel("Preemptions per hour", {
            "preemptions": f"sum(increase({alerts.PREEMPTIONS}{{{model}}}[1h]))"},
            "short", (12, 24, 12, 8)),
        _panel("Diff acceptance per team (edit decisions harnesses reported)", {
            "{{team}}": f'sum by (team) (increase({EDIT_DECISIONS}{{decision="accept"}}[1d])) / '
                        f"sum by (team) (increase({EDIT_DECISIONS}[1d]))"},
            "percentunit", (12, 32, 12, 8)),
    ]
    return {"uid": UID, "title": "spear-fleet", "schemaVersion": 39, "editable": False,
            "time": {"from": "now-24h", "to": "now"}, "refresh": "1m",
            "templating": {"list": [{"name": "datasource", "type": "datasource",
                                     "query": "prometheus"}]},
            "panels": panels}


def metrics_read(dashboard: dict[str, Any]) -> set[str]:
    """The metric names the dashboard's queries read (label matchers, grouping, ranges and the
    functions left out)."""
    return {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in _NAME.findall(_NOT_A_NAME.sub(" ", target["expr"]))
            if name not in PROMQL_FUNCTIONS}


def config_map(namespace: str, served_model_name: str) -> dict[str, Any]:
    return {"metadata": {"name": "vllm-dashboard", "namespace": namespace,
                         "labels": {"spear-fleet/part": "dashboard", "grafana_dashboard": "1"}},
            "data": {FILE: json.dumps(render(served_model_name), indent=1)}}
