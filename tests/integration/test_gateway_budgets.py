"""Budgets that hold, on real LiteLLM 1.91.1 with its PostgreSQL (database mode, virtual keys).

The headline, side by side: N concurrent $1 requests on a key whose budget fits k of them,
against stock LiteLLM's own budget check and against spear-fleet's hook. Stock 1.91.1 reserves
budget itself (proxy/spend_tracking/budget_reservation.py), so it is measured where its
reservation is known to give way, not assumed to overspend: (1) a budget with a remainder
smaller than one request (its reservation shrinks to the remainder and admits the request),
(2) two replicas on one database (its reservation counter lives in each process unless Redis is
configured). spear-fleet's ledger is in PostgreSQL and holds the whole worst case: it never
exceeds the budget. Then five $7 escalations against a $20 hatch cap: exactly two reach the
frontier, the others are refused visibly, and the hatch settles at $14; and every replica's
exporter says the same spend per developer, read from the shared database.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from localhosts.servers.litellm_venv import litellm_venv
from spear.rules import CODER_MODEL
from localhosts.standins.frontier_standin import FrontierStandin
from localhosts.servers.litellm_proxy import ProxyError, migrate
from localhosts.standins.openai_upstream import OpenAIUpstream
from localhosts.servers.postgres import postgres_database
from localhosts.servers.spear_gateway_proxy import (FRONTIER_KEY, gateway_config, metric,
                                             spear_proxy)

VERSION = "1.91.1"
STOCK_PORTS, SPEAR_PORTS, UPSTREAM_PORT, FRONTIER_PORT = (4122, 4124), (4123, 4125), 8152, 8162
N = 10                          # concurrent requests
OUTPUT_USD = 0.01               # coder's output price; input is free
MAX_TOKENS = 100                # so every request costs exactly 1 USD (the stand-in fills it)
# (replicas, budget): k = 2 of the $1 requests fit in $2.50; k = 3 fit in $3.00.
SCENARIOS = {"one replica, a budget of $2.50": (1, 2.5), "two replicas, a budget of $3.00": (2, 3.0)}
HATCH_CAP, ESCALATION_USD = 20.0, 7.0


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    venv = litellm_venv(VERSION)
    with postgres_database() as db, \
            OpenAIUpstream(UPSTREAM_PORT, completion_tokens=10**6, delay_seconds=2.0) as upstream, \
            FrontierStandin(FRONTIER_PORT, FRONTIER_KEY, fill_max_tokens=True,
                            delay_seconds=1.0) as frontier:
        migrate(venv.path, db.url)
        yield venv.path, db, upstream, frontier


def replicas(stand, tmp_path_factory, *, hooks):
    """Two gateway processes on one database, as two replicas behind a balancer."""
    venv, db, upstream, frontier = stand
    config = gateway_config(upstream.base_url, frontier.base_url, hooks=hooks,
                            coder_prices=(0.0, OUTPUT_USD),
                            frontier_prices=(0.0, ESCALATION_USD / 7))
    kind = "spear" if hooks else "stock"
    return [spear_proxy(venv, config, port=port, log_dir=tmp_path_factory.mktemp(f"{kind}-{port}"),
                        hatch_cap_usd=HATCH_CAP, database_url=db.url)
            for port in (SPEAR_PORTS if hooks else STOCK_PORTS)]


@pytest.fixture(scope="module")
def stock(stand, tmp_path_factory):
    proxies = replicas(stand, tmp_path_factory, hooks=False)
    for proxy in proxies:
        proxy.start()
    print(f"\nstock litellm {VERSION} (database mode): replicas started in "
          f"{', '.join(f'{p.last_start_seconds:.1f} s' for p in proxies)}")
    yield proxies
    for proxy in proxies:
        proxy.stop()


@pytest.fixture(scope="module")
def spear(stand, tmp_path_factory):
    proxies = replicas(stand, tmp_path_factory, hooks=True)
    for proxy in proxies:
        proxy.start()
    print(f"\nspear-fleet's gateway on litellm {VERSION}: replicas started in "
          f"{', '.join(f'{p.last_start_seconds:.1f} s' for p in proxies)}")
    yield proxies
    for proxy in proxies:
        proxy.stop()


def developer_key(proxy, budget):
    return proxy.post("/key/generate", {"models": [CODER_MODEL], "max_budget": budget,
                                        "budget_duration": "30d",
                                        "metadata": {"developer": "ana"}})["key"]


def concurrently(proxies, key, texts, max_tokens):
    """Each text as one request, all at once, spread over the replicas in turn."""
    def one(numbered):
        i, text = numbered
        try:
            proxies[i % len(proxies)].post("/v1/chat/completions", {
                "model": CODER_MODEL, "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": text}]}, key=key, timeout=120)
            return 200, None
        except ProxyError as e:
            return e.status, e.body["error"]["type"]
    with ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(one, enumerate(texts)))


def settled_spend(proxy, key, expected_at_least):
    """The key's spend as LiteLLM reports it, once its batched writes have landed."""
    deadline, spend = time.monotonic() + 90, None
    while time.monotonic() < deadline:
        spend = proxy.get(f"/key/info?key={key}")["info"]["spend"]
        if spend >= expected_at_least - 1e-9:
            time.sleep(3)  # a few more batch writes (every second here): nothing else arrives
            return proxy.get(f"/key/info?key={key}")["info"]["spend"]
        time.sleep(2)
    return spend


def measure(proxies, kind, scenario):
    count, budget = SCENARIOS[scenario]
    key = developer_key(proxies[0], budget)
    outcomes = concurrently(proxies[:count], key, [f"request {i}" for i in range(N)], MAX_TOKENS)
    served = sum(1 for status, _ in outcomes if status == 200)
    spend = settled_spend(proxies[0], key, served * 1.0)
    refused = sorted(o for o in outcomes if o[0] != 200)
    print(f"\n{kind} litellm {VERSION}, {scenario}: {N} concurrent $1 requests: {served} served,"
          f" spend ${spend:.2f}, over the budget by ${max(0.0, spend - budget):.2f};"
          f" refused: {refused}")
    return budget, outcomes, served, spend


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_stock_litellm_budget_check_measured(stock, scenario):
    budget, outcomes, served, spend = measure(stock, "STOCK", scenario)
    # The measurement itself: LiteLLM billed every request it served, at $1 each, and refused
    # the others as over budget.
    assert spend == pytest.approx(served * 1.0)
    assert all(o == (429, "budget_exceeded") for o in outcomes if o[0] != 200), outcomes


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_spear_fleet_never_lets_concurrent_requests_exceed_a_key_budget(spear, stand, scenario):
    budget, outcomes, served, spend = measure(spear, "SPEAR-FLEET", scenario)
    assert served == int(budget)             # every request that fits, and not one more
    assert spend <= budget
    assert spend == pytest.approx(served * 1.0)
    # Refused visibly, by LiteLLM's own check or by spear-fleet's, never served.
    assert {o for o in outcomes if o[0] != 200} <= {(429, "budget_exceeded"),
                                                     (429, "spear_budget_exceeded")}
    # Nothing is left held: every admitted request settled, every refused one held nothing.
    with psycopg.connect(stand[1].url) as conn:
        assert conn.execute("SELECT count(*) FROM spear_gateway.spear_budget_requests"
                            " WHERE NOT settled").fetchone()[0] == 0


def test_five_7_dollar_escalations_against_a_20_dollar_cap_admit_exactly_two_and_settle_at_14(
        spear, stand):
    venv, db, upstream, frontier = stand
    key = developer_key(spear[0], 1000.0)
    calls = frontier.calls
    # The fleet answers 503 to each; the frontier's answer costs exactly its worst case, $7.
    outcomes = concurrently(spear, key, [f"escalation {i} SPEAR-ANSWER-STATUS=503" for i in range(5)],
                            max_tokens=7)
    assert sorted(outcomes) == [(200, None)] * 2 + [(429, "hatch_budget_exhausted")] * 3
    assert frontier.calls == calls + 2
    with psycopg.connect(db.url) as conn:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and conn.execute(
                "SELECT count(*) FROM spear_gateway.spear_budget_requests WHERE NOT settled"
        ).fetchone()[0]:
            time.sleep(0.5)
        assert conn.execute("SELECT spent_nanos FROM spear_gateway.spear_budget_hatch").fetchone()[0] \
            == 14 * 10**9
    # Each replica counts what it saw; together: two escalations, three refusals, $14.
    assert sum(metric(p, "spear_hatch_escalations_total", status="503") for p in spear) == 2
    assert sum(metric(p, "spear_hatch_rejections_total", status="503") for p in spear) == 3
    # The hatch's spend is read from the shared ledger at each scrape: every replica says 14.
    assert [metric(p, "spear_hatch_spend_usd") for p in spear] == [14.0] * len(spear)


def test_every_replica_exports_each_developers_spend_and_tokens_from_the_shared_database(
        spear, stand):
    db = stand[1]
    with psycopg.connect(db.url) as conn:
        spent = int(conn.execute("SELECT sum(used_nanos) FROM spear_gateway.spear_budget_keys"
                                 ).fetchone()[0]) / 1e9
    assert spent > 0
    # Every key of this module is ana's (developer_key), with no team.
    for proxy in spear:
        assert metric(proxy, "spear_developer_spend_usd", developer="ana", team="") == \
            pytest.approx(spent)
        assert metric(proxy, "spear_budget_holds_in_flight") == 0
    # Tokens come from LiteLLM's spend logs, which it writes in batches.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not metric(
            spear[0], "spear_developer_tokens_total", developer="ana", kind="completion", team=""):
        time.sleep(2)
    assert metric(spear[0], "spear_developer_tokens_total", developer="ana", kind="completion",
                  team="") > 0
