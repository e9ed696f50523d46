"""The budget ledger in a real PostgreSQL, what only it has: its tables, concurrency from several
processes (as several gateway replicas) that never takes a key past its budget or the hatch past
its cap, and holds expired on the database's clock. The contract's scenarios run on it with the
unit tests (tests/unit/gateway/test_budget_contract.py)."""

import contextlib
import multiprocessing
import random
import socket
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import psycopg
import pytest

from localhosts.servers.postgres import postgres_database
from spear_gateway.pg_store import PgStore

PROCESSES, THREADS = 4, 4


@pytest.fixture(scope="module")
def database():
    with postgres_database(name="spear_budget", user="spear") as db:
        yield db


@pytest.fixture
def store(database):
    database.psql("DROP SCHEMA IF EXISTS spear_gateway CASCADE")
    s = PgStore(database.url, hatch_cap_usd=10.0)
    yield s
    s.close()


def test_the_tables_are_created_once_and_creating_them_again_changes_nothing(database, store):
    store.admit("ana", "r1", 1.0, 10.0)
    # Again, through a URL as LiteLLM's Prisma takes it (parameters libpq does not know).
    PgStore(database.url + "?schema=public&connection_limit=5", hatch_cap_usd=10.0).close()
    assert database.psql("SELECT count(*) FROM spear_gateway.spear_budget_requests") == "1"
    assert set(database.psql("SELECT tablename FROM pg_tables WHERE schemaname = 'spear_gateway'")
               .split()) == {"spear_budget_keys", "spear_budget_hatch", "spear_budget_requests"}


class RoundTrips:
    """A TCP relay in front of PostgreSQL that counts round trips: each time a connection's
    client speaks after its server did (a pipeline's statements sent together count once)."""

    def __init__(self, port: int) -> None:
        self.port, self.count, self._lock = port, 0, threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(("127.0.0.1", self.port))
            last = ["server"]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink, source is client, last),
                                 daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool,
              last: list[str]) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                with self._lock:
                    side = "client" if from_client else "server"
                    self.count += from_client and last[0] == "server"
                    last[0] = side
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._listener.close()


def test_an_admission_and_a_settlement_are_one_round_trip_each(database, store):
    """So a key's row lock is held while the server runs one statement, never across the
    network: what a key's concurrent requests would queue on."""
    port = int(database.url.rsplit(":", 1)[1].split("/")[0])
    relay = RoundTrips(port)
    relayed = PgStore(database.url.replace(f"127.0.0.1:{port}", relay.address), hatch_cap_usd=10.0,
                      max_connections=1, hold_ttl_seconds=600.0)
    try:
        relayed.admit("ana", "warm", 1.0, 10.0)  # the pool's connection and its prepared plans
        counts = []
        for call in (lambda: relayed.admit("ana", "r1", 1.0, 10.0), lambda: relayed.settle("r1", 0.5)):
            before = relay.count
            call()
            counts.append(relay.count - before)
        assert counts == [1, 1]
        assert relayed.used_usd("ana") == 0.5 and relayed.held_usd("ana") == 1.0
    finally:
        relayed.close()
        relay.close()


# --- Concurrency: each process is its own store (its own connections), as a replica is.

def _admit_many(url, key, prefix, count, worst, budget, settle_fraction):
    store = PgStore(url, hatch_cap_usd=0.0)
    rng = random.Random(prefix)
    admitted = []

    def one(i):
        rid = f"{prefix}-{i}"
        verdict = store.admit(key, rid, worst, budget)
        if verdict == "fleet" and settle_fraction is not None:
            store.settle(rid, round(worst * rng.random() * settle_fraction, 6))
        return verdict

    with ThreadPoolExecutor(THREADS) as pool:
        admitted = [v for v in pool.map(one, range(count))]
    store.close()
    return admitted


def _hammer(url, key, count, worst, budget, settle_fraction=None):
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(PROCESSES, mp_context=ctx) as pool:
        futures = [pool.submit(_admit_many, url, key, f"{key}-p{p}", count, worst, budget,
                               settle_fraction) for p in range(PROCESSES)]
        return [v for f in futures for v in f.result()]


def _spend_and_holds(conn, key):
    """The key's settled spend plus its holds, read in one statement (one snapshot)."""
    return conn.execute(
        "SELECT (SELECT used_nanos FROM spear_gateway.spear_budget_keys WHERE key = %s)"
        " + (SELECT coalesce(sum(held_nanos), 0) FROM spear_gateway.spear_budget_requests"
        " WHERE key = %s AND NOT settled)", (key, key)).fetchone()[0] / 10**9


def test_concurrent_admissions_from_several_processes_hold_exactly_the_budget(database, store):
    verdicts = _hammer(database.url, "ana", 20, worst=1.0, budget=10.0)
    print(f"\n{PROCESSES} processes x {THREADS} threads, 80 requests of $1 on a $10 budget: "
          f"{verdicts.count('fleet')} admitted")
    assert verdicts.count("fleet") == 10
    assert verdicts.count("reject-quota") == 70
    assert store.held_usd("ana") == 10.0


def test_admitting_and_settling_at_once_never_takes_a_key_past_its_budget(database, store):
    seen, stop = [], threading.Event()

    def watch():
        with psycopg.connect(database.url, autocommit=True) as conn:
            while not stop.is_set():
                seen.append(float(_spend_and_holds(conn, "bob")))

    watcher = threading.Thread(target=watch)
    store.admit("bob", "seed", 0.001, 25.0)
    store.settle("seed", 0.001)
    watcher.start()
    try:
        verdicts = _hammer(database.url, "bob", 40, worst=1.0, budget=25.0, settle_fraction=1.0)
    finally:
        stop.set()
        watcher.join()
    print(f"\nadmitted {verdicts.count('fleet')} of {len(verdicts)}; highest spend + holds seen "
          f"${max(seen):.6f} of $25 over {len(seen)} looks; settled ${store.used_usd('bob'):.6f}")
    assert verdicts.count("fleet") > 25          # settlement below the hold frees headroom
    assert "reject-quota" in verdicts
    assert max(seen) <= 25.0 and store.used_usd("bob") <= 25.0


def _escalate(url, rid):
    store = PgStore(url, hatch_cap_usd=20.0)
    store.admit("dev", rid, 1.0, None)
    verdict = store.escalate(rid, 503, 7.0)
    store.settle(rid, 0.5, hatch_usd=7.0 if verdict == "hatch" else 0.0)
    store.close()
    return verdict


def test_five_concurrent_7_dollar_escalations_against_a_20_dollar_cap_admit_two(database, store):
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(5, mp_context=ctx) as pool:
        verdicts = list(pool.map(_escalate, [database.url] * 5, [f"s{i}" for i in range(5)]))
    assert sorted(verdicts) == ["hatch"] * 2 + ["reject-hatch-budget"] * 3
    # Closed here: a pool left to the garbage collector is collected in its own worker thread,
    # which then cannot join itself.
    reader = PgStore(database.url, hatch_cap_usd=20.0)
    try:
        assert reader.hatch_spent_usd == 14.0
    finally:
        reader.close()



def test_a_hold_never_settled_is_charged_in_full_after_its_ttl_and_a_late_settle_is_refused(database):
    from spear_gateway.budget import HoldExpired
    database.psql("DROP SCHEMA IF EXISTS spear_gateway CASCADE")
    store = PgStore(database.url, hatch_cap_usd=10.0, hold_ttl_seconds=0.5)
    try:
        store.admit("ana", "lost", 4.0, 10.0, window="w1")
        assert store.escalate("lost", 503, 2.0) == "hatch"
        time.sleep(0.6)
        assert store.admit("ana", "next", 10.0, 10.0, window="w2") == "fleet"   # the window rolled
        assert store.hatch_spent_usd == 2.0
        with pytest.raises(HoldExpired):
            store.settle("lost", 1.0)
        assert store.used_usd("ana") == 0.0 and store.held_usd("ana") == 10.0
    finally:
        store.close()


def test_an_expired_hold_is_charged_what_was_measured_of_it_on_the_database(database):
    database.psql("DROP SCHEMA IF EXISTS spear_gateway CASCADE")
    store = PgStore(database.url, hatch_cap_usd=10.0, hold_ttl_seconds=0.5)
    try:
        store.admit("ana", "streamed", 4.0, 10.0)
        store.admit("ana", "silent", 3.0, 10.0)
        store.measure("streamed", 9.0)  # never above the hold
        store.measure("streamed", 1.25)
        time.sleep(0.6)
        store.expire_stale()
        assert store.used_usd("ana") == 1.25 + 3.0 and store.holds_in_flight() == 0
        store.measure("streamed", 2.0)  # settled: nothing more is recorded
        assert database.psql("SELECT measured_nanos FROM spear_gateway.spear_budget_requests"
                             " WHERE request_id = 'streamed'") == "1250000000"
    finally:
        store.close()
