"""The budget ledger with its state in PostgreSQL: the gateway's own database, its own tables
(`spear_budget_*`), so several gateway processes or replicas share one ledger.

The decisions are `budget.BudgetRules`, the same functions the in-memory `Ledger` calls; this
module only reads the state they need and writes what they decide, inside one transaction per
call. Concurrency: READ COMMITTED with row locks taken in one order, the key's row, then the
hatch's row, then the request's row. Every writer of a key's holds or spend (admit, settle)
locks the key's row first, so the sum of holds an admission reads cannot change before it
commits; every writer of hatch holds or hatch spend locks the hatch's row. One order means no
deadlock; a deadlock or serialization failure (which would mean a bug in that order) is retried.

Round trips: an admission and a settlement are each one statement, a function of the schema
below, so each is one round trip and its own transaction (autocommit), and a key's row lock is
held only while the server runs it: never across the network or the gateway's event loop, which
is what a key's concurrent requests queued on when the hooks decided between statements
(docs/BENCHMARKS.md, "The gateway's own cost"). The functions state `BudgetRules.admit`,
`rolls` and `check_settle` in SQL because the decision must be taken under the lock; the contract
tests hold both ledgers to the same scenarios (tests/unit/gateway/test_budget_contract.py), and
a settlement's refusal is still raised by `check_settle`, on the row as the function found it.
The rarer calls (an escalation, expiring stale holds) run their statements in psycopg's pipeline
mode in one transaction.

Money is in integer nano-dollars (BIGINT), as in budget.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors
from psycopg_pool import ConnectionPool

from spear_gateway.budget import (Admission, BudgetRules, ContractViolation, DeveloperUsage,
                                  Escalation, Hold, nanos, nanos_up, usd)

T = TypeVar("T")
SCHEMA = """
CREATE SCHEMA IF NOT EXISTS spear_gateway;
CREATE TABLE IF NOT EXISTS spear_gateway.spear_budget_keys (
    key         TEXT PRIMARY KEY,            -- LiteLLM's hashed key (token), never the key
    window_id   TEXT,                        -- the key's budget window (its budget_reset_at)
    used_nanos  BIGINT NOT NULL DEFAULT 0    -- settled spend in that window
);
CREATE TABLE IF NOT EXISTS spear_gateway.spear_budget_hatch (
    id          SMALLINT PRIMARY KEY CHECK (id = 1),
    month       TEXT,
    spent_nanos BIGINT NOT NULL DEFAULT 0
);
INSERT INTO spear_gateway.spear_budget_hatch (id, month, spent_nanos) VALUES (1, NULL, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS spear_gateway.spear_budget_requests (
    request_id          TEXT PRIMARY KEY,    -- never deleted by a reset: ids stay unique
    key                 TEXT NOT NULL REFERENCES spear_gateway.spear_budget_keys (key),
    held_nanos          BIGINT NOT NULL,
    hatch_held_nanos    BIGINT,
    fleet_status        TEXT,
    settled             BOOLEAN NOT NULL DEFAULT false,
    key_settled_nanos   BIGINT,
    hatch_settled_nanos BIGINT,
    admitted_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    settled_at          TIMESTAMPTZ
);
ALTER TABLE spear_gateway.spear_budget_requests
    ADD COLUMN IF NOT EXISTS expired BOOLEAN NOT NULL DEFAULT false;
-- What a request in flight has used so far (a stream's checkpoint): what its expiry charges.
ALTER TABLE spear_gateway.spear_budget_requests
    ADD COLUMN IF NOT EXISTS measured_nanos BIGINT;
CREATE INDEX IF NOT EXISTS spear_budget_requests_in_flight
    ON spear_gateway.spear_budget_requests (key) WHERE NOT settled;
-- Charges the key's holds older than the TTL (the caller holds the key's row lock): the key what
-- was measured of each, or in full when nothing was; the hatch in full.
CREATE OR REPLACE FUNCTION spear_gateway.expire_key(p_key TEXT, p_ttl DOUBLE PRECISION)
RETURNS void LANGUAGE sql AS $$
    WITH stale AS (
        UPDATE spear_gateway.spear_budget_requests SET settled = true, expired = true,
            key_settled_nanos = coalesce(measured_nanos, held_nanos),
            hatch_settled_nanos = coalesce(hatch_held_nanos, 0), settled_at = now()
        WHERE key = p_key AND NOT settled AND admitted_at < now() - make_interval(secs => p_ttl)
        RETURNING key_settled_nanos AS held, coalesce(hatch_held_nanos, 0) AS hatch),
    total AS (SELECT coalesce(sum(held), 0) AS held, coalesce(sum(hatch), 0) AS hatch FROM stale),
    charged AS (UPDATE spear_gateway.spear_budget_keys SET used_nanos = used_nanos + total.held
                FROM total WHERE key = p_key AND total.held > 0 RETURNING 1)
    UPDATE spear_gateway.spear_budget_hatch SET spent_nanos = spent_nanos + total.hatch
    FROM total WHERE id = 1 AND total.hatch > 0
$$;
-- BudgetRules.admit (and .rolls) under the key's row lock; p_ttl NULL: holds never expire.
CREATE OR REPLACE FUNCTION spear_gateway.admit(p_key TEXT, p_request TEXT, p_worst BIGINT,
    p_budget BIGINT, p_window TEXT, p_spend BIGINT, p_ttl DOUBLE PRECISION)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
    current_window TEXT; used BIGINT; holds BIGINT; held BIGINT; rolls BOOLEAN;
BEGIN
    INSERT INTO spear_gateway.spear_budget_keys (key) VALUES (p_key) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM spear_gateway.spear_budget_keys WHERE key = p_key FOR UPDATE;
    IF p_ttl IS NOT NULL THEN
        PERFORM spear_gateway.expire_key(p_key, p_ttl);
    END IF;
    IF EXISTS (SELECT 1 FROM spear_gateway.spear_budget_requests WHERE request_id = p_request) THEN
        RETURN 'reject-duplicate';
    END IF;
    SELECT k.window_id, k.used_nanos INTO current_window, used
    FROM spear_gateway.spear_budget_keys k WHERE k.key = p_key;
    SELECT count(*), coalesce(sum(held_nanos), 0) INTO holds, held
    FROM spear_gateway.spear_budget_requests r WHERE r.key = p_key AND NOT r.settled;
    rolls := current_window IS DISTINCT FROM p_window AND holds = 0;
    IF p_budget IS NOT NULL
       AND (CASE WHEN rolls THEN p_spend ELSE used END) + held + p_worst > p_budget THEN
        RETURN 'reject-quota';
    END IF;
    IF rolls THEN
        UPDATE spear_gateway.spear_budget_keys SET window_id = p_window, used_nanos = p_spend
        WHERE key = p_key;
    END IF;
    INSERT INTO spear_gateway.spear_budget_requests (request_id, key, held_nanos)
    VALUES (p_request, p_key, p_worst);
    RETURN 'fleet';
END $$;
-- Settles when BudgetRules.check_settle would pass, under the key's row lock then the request's;
-- returns the request's row as it was before (no row: never admitted) for check_settle to judge.
CREATE OR REPLACE FUNCTION spear_gateway.settle(p_request TEXT, p_key_amount BIGINT,
    p_hatch_amount BIGINT)
RETURNS TABLE (key TEXT, held_nanos BIGINT, hatch_held_nanos BIGINT, settled BOOLEAN,
               expired BOOLEAN)
LANGUAGE plpgsql AS $$
DECLARE
    r RECORD;
BEGIN
    PERFORM 1 FROM spear_gateway.spear_budget_keys k WHERE k.key = (SELECT q.key FROM
        spear_gateway.spear_budget_requests q WHERE q.request_id = p_request) FOR UPDATE;
    SELECT q.key, q.held_nanos, q.hatch_held_nanos, q.settled, q.expired INTO r
    FROM spear_gateway.spear_budget_requests q WHERE q.request_id = p_request FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF NOT r.settled AND NOT r.expired AND p_key_amount <= r.held_nanos
       AND p_hatch_amount <= coalesce(r.hatch_held_nanos, 0) THEN
        UPDATE spear_gateway.spear_budget_requests q SET settled = true,
            key_settled_nanos = p_key_amount, hatch_settled_nanos = p_hatch_amount,
            settled_at = now() WHERE q.request_id = p_request;
        UPDATE spear_gateway.spear_budget_keys k SET used_nanos = k.used_nanos + p_key_amount
        WHERE k.key = r.key;
        IF p_hatch_amount > 0 THEN
            UPDATE spear_gateway.spear_budget_hatch h SET spent_nanos = h.spent_nanos + p_hatch_amount
            WHERE h.id = 1;
        END IF;
    END IF;
    RETURN QUERY SELECT r.key, r.held_nanos, r.hatch_held_nanos, r.settled, r.expired;
END $$;
"""
_RETRIED = (errors.DeadlockDetected, errors.SerializationFailure)
# LiteLLM's own tables (its Prisma schema), read only: a key's owner is its metadata's developer
# (components/gateway/keys.py::key_metadata), its spend logs name it by the hashed key.
_DEVELOPER_USAGE = """
WITH owners AS (
    SELECT token, coalesce(metadata->>'developer', key_alias, '') AS developer,
           coalesce(metadata->>'team', '') AS team, max_budget
    FROM "LiteLLM_VerificationToken"),
tokens AS (
    SELECT api_key, sum(prompt_tokens) AS prompt, sum(completion_tokens) AS completion
    FROM "LiteLLM_SpendLogs" GROUP BY api_key)
SELECT o.developer, o.team, coalesce(sum(k.used_nanos), 0), max(o.max_budget),
       coalesce(sum(t.prompt), 0), coalesce(sum(t.completion), 0)
FROM owners o
LEFT JOIN spear_gateway.spear_budget_keys k ON k.key = o.token
LEFT JOIN tokens t ON t.api_key = o.token
GROUP BY o.developer, o.team ORDER BY o.developer, o.team
"""
_KEY_OWNER = """
SELECT coalesce(metadata->>'developer', key_alias, ''), coalesce(metadata->>'team', '')
FROM "LiteLLM_VerificationToken"
WHERE token = %s AND blocked IS NOT TRUE
  AND (expires IS NULL OR expires > now() AT TIME ZONE 'UTC')  -- Prisma writes UTC, no zone
"""


# The URL parameters libpq understands; Prisma's own (schema, connection_limit, pool_timeout,
# pgbouncer, ...) may be in the gateway's DATABASE_URL and libpq refuses them.
LIBPQ_PARAMETERS = frozenset({"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword",
                              "connect_timeout", "application_name", "options",
                              "target_session_attrs", "channel_binding", "host", "port"})


def libpq_url(url: str) -> str:
    """`url` without the query parameters libpq does not know."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k in LIBPQ_PARAMETERS]
    return urlunsplit(parts._replace(query=urlencode(query)))


class PgStore:
    """The ledger of budget.Ledger, in PostgreSQL at `url`; methods block (call them from a
    thread in async code)."""

    def __init__(self, url: str, hatch_cap_usd: float, *, max_connections: int = 8,
                 hold_ttl_seconds: float | None = None) -> None:
        self.cap = nanos("hatch_cap_usd", hatch_cap_usd)
        self.hold_ttl_seconds = hold_ttl_seconds
        self._pool = ConnectionPool(libpq_url(url), min_size=1, max_size=max_connections, open=True,
                                    kwargs={"autocommit": True})
        # Outside the pipeline: a pipeline takes one command per statement, SCHEMA is several.
        with self._pool.connection() as conn, conn.transaction():
            self._create_schema(conn)

    def close(self) -> None:
        self._pool.close()

    def _run(self, work: Callable[[psycopg.Connection], T]) -> T:
        """`work`'s statements in one transaction, pipelined."""
        return self._retried(lambda: self._in_transaction(work))

    def _in_transaction(self, work: Callable[[psycopg.Connection], T]) -> T:
        with self._pool.connection() as conn, conn.pipeline(), conn.transaction():
            return work(conn)

    def _one(self, sql: str, params: tuple = ()) -> list[tuple]:
        """One statement's rows: its own transaction, one round trip."""
        def one() -> list[tuple]:
            with self._pool.connection() as conn:
                cursor = conn.execute(sql, params)
                return cursor.fetchall() if cursor.description else []
        return self._retried(one)

    @staticmethod
    def _retried(attempt_once: Callable[[], T]) -> T:
        for attempt in range(5):
            try:
                return attempt_once()
            except _RETRIED:
                if attempt == 4:
                    raise
                time.sleep(0.01 * 2 ** attempt)
        raise AssertionError("unreachable")

    @staticmethod
    def _create_schema(conn: psycopg.Connection) -> None:
        # Several gateway processes may start at once; CREATE ... IF NOT EXISTS is not safe
        # against itself, so the creation is serialized on an advisory lock.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('spear_budget_schema'))")
        conn.execute(SCHEMA)

    # -- the contract ------------------------------------------------------------------------

    def admit(self, key: str, request_id: str, worst_usd: float, budget_usd: float | None, *,
              window: str = "", spend_usd: float = 0.0) -> Admission:
        """As budget.Ledger.admit."""
        worst = nanos_up("worst_usd", worst_usd)
        budget = None if budget_usd is None else nanos("budget_usd", budget_usd)
        spend = nanos("spend_usd", spend_usd)
        if worst <= 0:
            raise ContractViolation(f"worst_usd {worst_usd!r}: a request's worst case must be > 0")
        try:
            return self._one("SELECT spear_gateway.admit(%s, %s, %s, %s, %s, %s, %s)",
                             (key, request_id, worst, budget, window, spend,
                              self.hold_ttl_seconds))[0][0]
        except errors.UniqueViolation:  # the same id admitted at the same moment for another key
            return "reject-duplicate"

    def escalate(self, request_id: str, fleet_status: int | str, estimate_usd: float, *,
                 month: str = "") -> Escalation:
        """As budget.Ledger.escalate."""
        estimate = nanos_up("estimate_usd", estimate_usd)
        self.expire_stale()

        def work(conn: psycopg.Connection) -> Escalation:
            current, spent = conn.execute(
                "SELECT month, spent_nanos FROM spear_gateway.spear_budget_hatch WHERE id = 1 FOR UPDATE").fetchone()
            row = conn.execute(
                "SELECT key, held_nanos, hatch_held_nanos FROM spear_gateway.spear_budget_requests"
                " WHERE request_id = %s AND NOT settled FOR UPDATE", (request_id,)).fetchone()
            if row is None:
                raise ContractViolation(f"request {request_id}: only a request in flight may escalate")
            holds, in_flight = conn.execute(
                "SELECT count(*), coalesce(sum(hatch_held_nanos), 0) FROM spear_gateway.spear_budget_requests"
                " WHERE NOT settled AND hatch_held_nanos IS NOT NULL").fetchone()
            if BudgetRules.rolls(current=current, window=month, holds=holds):
                conn.execute("UPDATE spear_gateway.spear_budget_hatch SET month = %s, spent_nanos = 0 WHERE id = 1",
                             (month,))
                spent = 0
            hold = Hold(*row)
            verdict = BudgetRules.escalate(hold=hold, fleet_status=fleet_status, hatch_spent=spent,
                                           hatch_in_flight=int(in_flight), cap=self.cap,
                                           estimate=estimate)
            if verdict == "hatch" and hold.hatch_held is None:
                conn.execute("UPDATE spear_gateway.spear_budget_requests SET hatch_held_nanos = %s,"
                             " fleet_status = %s WHERE request_id = %s",
                             (estimate, str(fleet_status), request_id))
            return verdict

        return self._run(work)

    def settle(self, request_id: str, key_usd: float, hatch_usd: float = 0.0) -> None:
        """As budget.Ledger.settle."""
        key_amount, hatch_amount = nanos("key_usd", key_usd), nanos("hatch_usd", hatch_usd)
        rows = self._one("SELECT * FROM spear_gateway.settle(%s, %s, %s)",
                         (request_id, key_amount, hatch_amount))
        key, held, hatch_held, settled, expired = rows[0] if rows else (None, 0, None, False, False)
        BudgetRules.check_settle(request_id, Hold(key, held, hatch_held) if rows else None,
                                 settled, key_amount, hatch_amount, expired=expired)

    # -- holds their process never settled ---------------------------------------------------

    def measure(self, request_id: str, key_usd: float) -> None:
        """What a request in flight has used so far (a stream's checkpoint): what its expiry
        charges the key if its gateway process never settles it. Nothing for a settled one."""
        amount = nanos("key_usd", key_usd)
        self._one("UPDATE spear_gateway.spear_budget_requests SET measured_nanos = least(%s, held_nanos)"
                  " WHERE request_id = %s AND NOT settled", (amount, request_id))

    def expire_stale(self) -> None:
        """Charge in full every hold older than the TTL, key by key (the lock order: the key's
        row, then the hatch's)."""
        if self.hold_ttl_seconds is None:
            return
        keys = self._one("SELECT DISTINCT key FROM spear_gateway.spear_budget_requests WHERE NOT settled"
                         " AND admitted_at < now() - make_interval(secs => %s)",
                         (self.hold_ttl_seconds,))
        for (key,) in keys:
            def work(conn: psycopg.Connection, key: str = key) -> None:
                conn.execute("SELECT 1 FROM spear_gateway.spear_budget_keys WHERE key = %s FOR UPDATE",
                             (key,))
                conn.execute("SELECT spear_gateway.expire_key(%s, %s)", (key, self.hold_ttl_seconds))
            self._run(work)

    # -- what the gauges and the tests read ----------------------------------------------------

    def used_usd(self, key: str) -> float:
        rows = self._one("SELECT used_nanos FROM spear_gateway.spear_budget_keys WHERE key = %s", (key,))
        return usd(rows[0][0]) if rows else 0.0

    def held_usd(self, key: str) -> float:
        return usd(int(self._one("SELECT coalesce(sum(held_nanos), 0) FROM spear_gateway.spear_budget_requests"
                                 " WHERE key = %s AND NOT settled", (key,))[0][0]))

    def hatch_spent_in(self, month: str) -> float:
        """The hatch's spend in `month` (YYYY-MM): 0 once that month is over, even before the
        next escalation starts the new one's count."""
        [(window, spent)] = self._one("SELECT month, spent_nanos FROM spear_gateway.spear_budget_hatch WHERE id = 1")
        return usd(spent) if window == month else 0.0

    def holds_in_flight(self) -> int:
        """Admitted requests not settled yet, on every replica."""
        return int(self._one("SELECT count(*) FROM spear_gateway.spear_budget_requests WHERE NOT settled")[0][0])

    def oldest_hold_seconds(self) -> float:
        """How long the oldest hold not settled has been held, on every replica (0 with none),
        on the database's clock."""
        return float(self._one("SELECT coalesce(extract(epoch FROM now() - min(admitted_at)), 0)"
                               " FROM spear_gateway.spear_budget_requests WHERE NOT settled")[0][0])

    def developer_usage(self) -> list[DeveloperUsage]:
        """Per developer (the keys' metadata; their rotated keys counted with them): the budget
        window's settled spend as the ledger holds it, the budget, and the tokens LiteLLM's spend
        logs record (written in batches, so they lag by seconds)."""
        return [DeveloperUsage(developer, team, usd(int(used)), float(budget or 0),
                               int(prompt), int(completion))
                for developer, team, used, budget, prompt, completion in self._one(_DEVELOPER_USAGE)]

    def key_owner(self, token: str) -> tuple[str, str] | None:
        """(developer, team) of a live key by LiteLLM's hash of it; None for no such key."""
        rows = self._one(_KEY_OWNER, (token,))
        return (rows[0][0], rows[0][1]) if rows else None

    @property
    def hatch_spent_usd(self) -> float:
        return usd(self._one("SELECT spent_nanos FROM spear_gateway.spear_budget_hatch WHERE id = 1")[0][0])
