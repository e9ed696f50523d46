"""spear-fleet's Prometheus metrics, in prometheus_client's default registry: LiteLLM's /metrics
serves that registry, so they appear next to LiteLLM's own. One module, imported by its package
name, so each metric is registered once however the callbacks module is loaded. What is read
from the database at each scrape (spend, the hatch's month, holds) is spear_gateway/exporter.py."""

from prometheus_client import Counter, Gauge, Histogram

HATCH_ESCALATIONS = Counter(
    "spear_hatch_escalations",  # exposed as spear_hatch_escalations_total
    "Requests the fleet could not serve (429, 5xx, timeout, connection) escalated to the hatch",
    ["status"])
HATCH_REJECTIONS = Counter(
    "spear_hatch_rejections",
    "Escalations refused because the hatch's monthly cap was reached", ["status"])
HATCH_CAP_USD = Gauge("spear_hatch_cap_usd", "The hatch's monthly cap in USD")
BUDGET_REJECTIONS = Counter(
    "spear_budget_rejections", "Requests refused because the key's budget could not hold them")
SETTLED_ABOVE_HOLD = Counter(
    "spear_budget_settled_above_hold",
    "Responses that cost more than their hold (an upstream ignored max_tokens); settled at the hold")
HOLDS_EXPIRED_THEN_SETTLED = Counter(
    "spear_budget_holds_expired_then_settled",
    "Requests that finished after their hold expired (charged in full at expiry): raise "
    "SPEAR_HOLD_TTL_SECONDS above the longest request")
SETTLED_ON_DISCONNECT = Counter(
    "spear_budget_settled_on_disconnect",
    "Streams whose client went away before their end, settled at once at what they used")
IN_FLIGHT = Gauge(
    "spear_requests_in_flight", "Admitted requests this process holds budget for, not yet settled")
FLEET_TTFT = Histogram(
    "spear_fleet_ttft_seconds",
    "Time to the first token of coder requests the fleet served, by the priority the gateway"
    " stamped (vLLM's own TTFT histogram has no priority)", ["priority"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0))
EDIT_DECISIONS = Counter(
    "spear_edit_decisions",
    "Edit decisions harnesses reported with a developer's key (spear_gateway/edits.py): diff"
    " acceptance is the share of decision=\"accept\"",
    ["developer", "team", "harness", "tool", "decision", "source"])
