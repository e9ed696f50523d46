"""The budget stores the gateway runs on, for the tests that hold both to one contract: the
in-memory `budget.Ledger` (a gateway without a database) and `pg_store.PgStore` on a real
PostgreSQL (production), each test on a store of its own."""

import pytest

from localhosts.servers.postgres import postgres_database
from spear_gateway.budget import Ledger
from spear_gateway.pg_store import PgStore


@pytest.fixture(scope="session")
def budget_database():
    with postgres_database(name="spear_budget", user="spear") as db:
        yield db


@pytest.fixture(params=["ledger", "postgres"])
def open_store(request):
    """`open_store(hatch_cap_usd)`: an empty store of the parametrized kind."""
    opened = []

    def open_one(hatch_cap_usd: float):
        if request.param == "ledger":
            return Ledger(hatch_cap_usd=hatch_cap_usd)
        database = request.getfixturevalue("budget_database")
        # The previous test's rows: PgStore creates its tables again when they are missing.
        database.psql("DROP SCHEMA IF EXISTS spear_gateway CASCADE")
        opened.append(PgStore(database.url, hatch_cap_usd=hatch_cap_usd))
        return opened[-1]

    yield open_one
    for store in opened:
        store.close()
