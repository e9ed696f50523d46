"""What scripts/up-local ends with: localhosts.local_stack.report, from the stack's outputs."""

from __future__ import annotations

from localhosts.local_stack import report

REVISION = "da6e2ed27304dd39abadd9c82ef50e8de67bdd4c"


def outputs(**fleet) -> dict:
    return {
        "inference_hosts": {"local": {"smoke_test": "end_turn | SPEAR-BACKEND-OK | ()"}},
        "gateway": {"smoke_tests": {"ana": "end_turn | SPEAR-BACKEND-OK | ()"},
                    "served_by": {"ana": ["local", "vllm-stable (vllm-stable-5d9f-x2x)"]}},
        "vllm_fleet": {"namespace": "vllm", "canary": None,
                       "stable": {"image": "vllm/vllm-openai:v0.24.0", "revision": REVISION, "replicas": 2},
                       **fleet},
    }


def test_the_report_says_who_served_each_developers_smoke_test_and_ends_with_the_fleet():
    assert report(outputs(stable_ready_replicas=2)) == [
        "smoke test (local): end_turn | SPEAR-BACKEND-OK | ()",
        "smoke test (gateway, coder, ana): end_turn | SPEAR-BACKEND-OK | (); served by local,"
        " vllm-stable (vllm-stable-5d9f-x2x)",
        "vLLM fleet (local cluster, namespace vllm): stable vllm/vllm-openai:v0.24.0 revision da6e2ed,"
        " 2/2 ready",
    ]


def test_a_fleet_with_no_ready_replica_reports_zero_of_its_replicas():
    # A Deployment with no ready pod has no readyReplicas in its status at all.
    assert "0/2 ready" in report(outputs(stable_ready_replicas=None))[-1]


def test_a_canary_is_reported_beside_the_stable_pair():
    canary = {"image": "vllm/vllm-openai:v0.25.0", "revision": "0123456789" * 4, "replicas": 1,
              "ready_replicas": 1}
    assert report(outputs(stable_ready_replicas=2, canary=canary))[-1].endswith(
        "2/2 ready; canary vllm/vllm-openai:v0.25.0 revision 0123456, 1/1 ready (pilot ring only)")


def test_a_stack_without_gateway_or_fleet_reports_its_inference_hosts_only():
    assert report({"inference_hosts": {"local": {"smoke_test": "ok"}}}) == ["smoke test (local): ok"]


def test_the_report_says_the_hatchs_cap_and_the_provider_limit_only_the_operator_can_set():
    out = outputs(stable_ready_replicas=2)
    out["gateway"]["hatch"] = {"monthly_cap_usd": 20.0, "alert_usd": 15.0, "provider_limit":
                               "set the monthly spend limit of frontierApiKey's account at"
                               " http://127.0.0.1:8090 to 20 USD (it cannot be set from here)"}
    assert report(out)[2] == (
        "hatch: refused over 20 USD a month, alert at 15 USD; set the monthly spend limit of"
        " frontierApiKey's account at http://127.0.0.1:8090 to 20 USD (it cannot be set from here)")


def test_a_bundled_prometheus_is_reported_last_at_its_port_on_this_machine():
    assert report(outputs(stable_ready_replicas=2, prometheus={"mode": "bundled", "port": 9090}))[-1] \
        == ("Prometheus (the fleet's and the gateway's metrics, the alert rules):"
            " http://127.0.0.1:9090/api/v1/alerts")
    operator = report(outputs(stable_ready_replicas=2, prometheus={"mode": "operator", "port": None}))
    assert operator[-1].startswith("vLLM fleet")
