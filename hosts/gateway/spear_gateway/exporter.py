"""The gateway's own exporter: what LiteLLM's Prometheus logger would say per key (an Enterprise
feature of LiteLLM) and what only spear-fleet's ledger knows, computed at each scrape from the
store, so every replica on one database exports the same numbers and nothing goes stale between
requests (the hatch's month is over at the boundary, not at the next escalation).

On LiteLLM's /metrics beside its own and the hook's counters (spear_gateway/metrics.py):
- spear_developer_spend_usd{developer,team}: settled in the key's budget window (the ledger's);
- spear_developer_budget_usd{developer,team}: the key's max_budget;
- spear_developer_tokens_total{developer,team,kind="prompt"|"completion"}: from LiteLLM's spend
  logs (batched: seconds behind);
- spear_hatch_spend_usd: this month's hatch spend (0 from the first second of a new month);
- spear_budget_holds_in_flight: admitted requests not yet settled, on every replica.
Per team: `sum by (team) (...)`.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

log = logging.getLogger(__name__)
LABELS = ("developer", "team")
HATCH_SPEND = "spear_hatch_spend_usd"
HOLDS = "spear_budget_holds_in_flight"
OLDEST_HOLD = "spear_budget_oldest_hold_seconds"  # the alert GatewayHoldStuck reads it
SPEND = "spear_developer_spend_usd"
BUDGET = "spear_developer_budget_usd"
TOKENS = "spear_developer_tokens"  # a counter: exposed as spear_developer_tokens_total


def this_month() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m")


class GatewayCollector(Collector):
    """`store`: the ledger (pg_store.PgStore, or budget.Ledger without a database)."""

    def __init__(self, store: Any, month: Callable[[], str] = this_month) -> None:
        self.store, self.month = store, month

    def collect(self) -> Iterator[Any]:
        try:
            hatch = self.store.hatch_spent_in(self.month())
            holds = self.store.holds_in_flight()
            oldest = self.store.oldest_hold_seconds()
            usage = self.store.developer_usage()
        except Exception as err:  # noqa: BLE001 (a scrape must not fail with the database)
            log.warning("spear_gateway exporter: the store did not answer: %s", err)
            return
        yield GaugeMetricFamily(HATCH_SPEND, "USD settled on the hatch this month"
                                " (for the spend alert)", value=hatch)
        yield GaugeMetricFamily(HOLDS, "Admitted requests not settled"
                                " yet, on every replica", value=holds)
        yield GaugeMetricFamily(OLDEST_HOLD, "Seconds the oldest hold not settled has been"
                                " held, on every replica (a client gone mid-stream is settled at"
                                " once: only a lost gateway process leaves one)", value=oldest)
        spend = GaugeMetricFamily(SPEND, "USD settled in the developer's"
                                  " budget window", labels=LABELS)
        budget = GaugeMetricFamily(BUDGET, "The developer's budget per"
                                   " window", labels=LABELS)
        tokens = CounterMetricFamily(TOKENS, "Tokens LiteLLM logged for the"
                                     " developer's keys", labels=(*LABELS, "kind"))
        for row in usage:
            who = [row.developer, row.team]
            spend.add_metric(who, row.spent_usd)
            budget.add_metric(who, row.budget_usd)
            tokens.add_metric([*who, "prompt"], row.prompt_tokens)
            tokens.add_metric([*who, "completion"], row.completion_tokens)
        yield from (spend, budget, tokens)


_registered: list[GatewayCollector] = []


def export(store: Any) -> None:
    """Register the collector for `store` once per process (the hook opens its store once)."""
    if _registered:
        _registered[0].store = store
        return
    collector = GatewayCollector(store)
    REGISTRY.register(collector)
    _registered.append(collector)
