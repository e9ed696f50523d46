"""The gateway's exporter (spear_gateway/exporter.py) reads the store at each scrape: the hatch's
spend of this month only (0 once the month is over, before any new escalation), the holds in
flight, and a line per developer; a store that does not answer leaves the scrape whole."""

from prometheus_client import CollectorRegistry, generate_latest

from spear_gateway.budget import DeveloperUsage, Ledger
from spear_gateway.exporter import GatewayCollector


def scrape(store, month: str) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(GatewayCollector(store, month=lambda: month))
    samples = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def ledger_with_a_7_dollar_escalation_in(month: str) -> Ledger:
    ledger = Ledger(hatch_cap_usd=20.0)
    ledger.admit("ana", "r1", 1.0, 10.0)
    ledger.escalate("r1", 503, 7.0, month=month)
    ledger.settle("r1", 1.0, 7.0)
    return ledger


def test_the_hatchs_spend_is_this_months_and_zero_once_the_month_is_over():
    ledger = ledger_with_a_7_dollar_escalation_in("2026-11")
    assert scrape(ledger, "2026-11")["spear_hatch_spend_usd"] == 7.0
    assert scrape(ledger, "2026-12")["spear_hatch_spend_usd"] == 0.0


def test_holds_in_flight_count_what_is_admitted_and_not_settled_and_the_oldest_is_timed():
    now = [100.0]
    ledger = Ledger(hatch_cap_usd=20.0, clock=lambda: now[0])
    assert scrape(ledger, "2026-12")["spear_budget_oldest_hold_seconds"] == 0.0
    ledger.admit("ana", "r1", 1.0, 10.0)
    now[0] = 130.0
    ledger.admit("bob", "r2", 1.0, 10.0)
    now[0] = 145.0
    assert scrape(ledger, "2026-12")["spear_budget_oldest_hold_seconds"] == 45.0
    ledger.settle("r1", 0.5)
    samples = scrape(ledger, "2026-12")
    assert samples["spear_budget_holds_in_flight"] == 1.0
    assert samples["spear_budget_oldest_hold_seconds"] == 15.0


class Store:
    """A store with keys, as pg_store.PgStore answers from the database."""

    def hatch_spent_in(self, month):
        return 0.0

    def holds_in_flight(self):
        return 0

    def oldest_hold_seconds(self):
        return 0.0

    def developer_usage(self):
        return [DeveloperUsage("ana", "platform", 3.25, 25.0, 1200, 340),
                DeveloperUsage("cyn", "research", 0.0, 10.0, 0, 0)]


def test_each_developer_gets_spend_budget_and_tokens_labelled_with_the_team():
    samples = scrape(Store(), "2026-12")
    assert samples['spear_developer_spend_usd{developer="ana",team="platform"}'] == 3.25
    assert samples['spear_developer_budget_usd{developer="cyn",team="research"}'] == 10.0
    assert samples['spear_developer_tokens_total{developer="ana",kind="prompt",team="platform"}'] \
        == 1200.0
    assert samples['spear_developer_tokens_total{developer="ana",kind="completion",team="platform"}'] \
        == 340.0


class Down(Store):
    def holds_in_flight(self):
        raise OSError("connection refused")


def test_a_store_that_does_not_answer_leaves_the_rest_of_the_scrape_whole():
    assert scrape(Down(), "2026-12") == {}
