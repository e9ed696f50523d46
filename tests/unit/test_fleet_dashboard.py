"""The fleet's Grafana dashboard (components/vllm_fleet/dashboard.py): valid JSON a Grafana
sidecar loads, a panel for each row of the cookbook's observability table it can fill, and
every metric its queries read is one something here exports: the gateway's exporter and hook,
or vLLM (the names the alert rules use). A real Prometheus runs each query against the gateway
in tests/integration/test_gateway_hatch.py."""

import json

from components.vllm_fleet import alerts, dashboard
from spear_gateway import exporter, metrics

MODEL = "qwen3-coder-next"


def exported() -> set[str]:
    """What the gateway and the fleet expose, as Prometheus names them."""
    gateway = {exporter.SPEND, exporter.BUDGET, f"{exporter.TOKENS}_total", exporter.HATCH_SPEND,
               exporter.HOLDS, f"{metrics.HATCH_ESCALATIONS._name}_total",
               metrics.HATCH_CAP_USD._name, f"{metrics.FLEET_TTFT._name}_bucket",
               f"{metrics.EDIT_DECISIONS._name}_total", dashboard.LITELLM_REQUESTS}
    vllm = {alerts.PREEMPTIONS, alerts.PREFIX_HITS, alerts.PREFIX_QUERIES,
            f"{alerts.TTFT}_bucket", f"{alerts.ITL}_bucket"}
    return gateway | vllm


def test_the_dashboard_is_json_a_grafana_sidecar_loads():
    config_map = dashboard.config_map("vllm", MODEL)
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    loaded = json.loads(config_map["data"][dashboard.FILE])
    assert loaded["uid"] == "spear-fleet" and loaded["panels"]
    assert all(t["expr"] and t["refId"] for p in loaded["panels"] for t in p["targets"])


def test_every_metric_a_panel_reads_is_one_the_gateway_or_the_fleet_exports():
    read = dashboard.metrics_read(dashboard.render(MODEL))
    assert read - exported() == set()
    # The cookbook's rows: spend and tokens per developer and team, escalations, TTFT, ITL,
    # the prefix cache, preemptions, diff acceptance.
    assert {dashboard.DEVELOPER_SPEND, dashboard.DEVELOPER_TOKENS, alerts.HATCH_ESCALATIONS,
            f"{alerts.TTFT}_bucket", f"{alerts.ITL}_bucket", alerts.PREFIX_HITS,
            alerts.PREEMPTIONS, dashboard.EDIT_DECISIONS} <= read


def test_the_dashboards_gateway_names_are_the_exporters():
    assert (dashboard.DEVELOPER_SPEND, dashboard.DEVELOPER_BUDGET, dashboard.DEVELOPER_TOKENS) == (
        exporter.SPEND, exporter.BUDGET, f"{exporter.TOKENS}_total")
    assert (dashboard.HATCH_CAP, dashboard.FLEET_TTFT, dashboard.EDIT_DECISIONS) == (
        metrics.HATCH_CAP_USD._name, metrics.FLEET_TTFT._name,
        f"{metrics.EDIT_DECISIONS._name}_total")


def test_the_fleets_queries_select_its_served_model():
    exprs = [t["expr"] for p in dashboard.render(MODEL)["panels"] for t in p["targets"]
             if "vllm:" in t["expr"]]
    assert exprs and all(f'model_name="{MODEL}"' in e for e in exprs)
