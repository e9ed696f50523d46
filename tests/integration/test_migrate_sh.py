"""hosts/gateway/migrate.sh on a real PostgreSQL 15, with migrations folders made here: what it
does beyond LiteLLM's own migrations (test_litellm_database_offline.py applies those), where a
run fails half-way, a name needs quoting, an index is built concurrently or a file's last
statement has no semicolon."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from localhosts.servers.litellm_proxy import MIGRATE_SH
from localhosts.servers.postgres import postgres_database


@pytest.fixture()
def db():
    with postgres_database(name="migrations", user="gateway") as database:
        yield database


def folder(root: Path, migrations: dict[str, str]) -> Path:
    for name, sql in migrations.items():
        (root / name).mkdir(parents=True)
        (root / name / "migration.sql").write_text(sql)
    return root


def run(db, migrations: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(MIGRATE_SH), "--migrations", str(migrations)],
                          capture_output=True, text=True, env={**os.environ, "DATABASE_URL": db.url})


def recorded(db) -> dict[str, str]:
    rows = db.psql("SELECT name || '|' || sha256 FROM spear_applied_migrations ORDER BY name")
    return dict(row.split("|") for row in rows.splitlines())


def tables(db) -> set[str]:
    return set(db.psql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").splitlines())


def test_each_migration_is_applied_once_in_name_order_and_recorded_with_its_sha256(db, tmp_path):
    migrations = folder(tmp_path, {
        "2_second": "INSERT INTO first (n) VALUES (2);\n",
        "1_first": "CREATE TABLE first (n int);\nINSERT INTO first (n) VALUES (1);\n",
        # Its name holds a space and a quote; its last statement ends without a semicolon.
        "3_it's next": "CREATE TABLE next (n int)",
        "4_index": "CREATE INDEX CONCURRENTLY IF NOT EXISTS first_n ON first (n);\n",
    })
    done = run(db, migrations)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("migrate: applied 4, skipped 0 in ")
    assert done.stderr.splitlines() == [f"migrate: applied {name}" for name in sorted(
        ("1_first", "2_second", "3_it's next", "4_index"))]
    assert recorded(db) == {name: hashlib.sha256((migrations / name / "migration.sql").read_bytes())
                            .hexdigest() for name in ("1_first", "2_second", "3_it's next", "4_index")}
    assert db.psql("SELECT string_agg(n::text, ',' ORDER BY n) FROM first") == "1,2"
    assert {"first", "next"} <= tables(db)
    assert db.psql("SELECT indexname FROM pg_indexes WHERE tablename = 'first'") == "first_n"
    again = run(db, migrations)
    assert again.returncode == 0 and again.stdout.startswith("migrate: applied 0, skipped 4 in ")
    assert db.psql("SELECT string_agg(n::text, ',' ORDER BY n) FROM first") == "1,2"


def test_a_failing_migration_is_rolled_back_and_records_nothing_and_none_after_it_runs(db, tmp_path):
    migrations = folder(tmp_path, {
        "1_good": "CREATE TABLE good (n int);\n",
        "2_bad": "CREATE TABLE half (n int);\nSELECT 1 / 0;\n",
        "3_after": "CREATE TABLE after (n int);\n",
    })
    failed = run(db, migrations)
    assert failed.returncode != 0
    assert "division by zero" in failed.stderr
    assert "migrate: applied 1_good" in failed.stderr.splitlines()
    assert set(recorded(db)) == {"1_good"}
    assert tables(db) == {"good", "spear_applied_migrations"}
    # Fixed, the next run applies it and what follows, and only those.
    (migrations / "2_bad" / "migration.sql").write_text("CREATE TABLE half (n int);\n")
    fixed = run(db, migrations)
    assert fixed.returncode == 0 and fixed.stdout.startswith("migrate: applied 2, skipped 1 in ")
    assert set(recorded(db)) == {"1_good", "2_bad", "3_after"}
