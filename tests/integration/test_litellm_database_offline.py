"""LiteLLM's database mode where Prisma's native engines cannot be downloaded: real LiteLLM
(1.91.1, then 1.108.7), real PostgreSQL 15, Prisma's WebAssembly query engine behind
hosts/gateway/prisma-offline/query-engine, migrations by hosts/gateway/migrate.sh. The upstream is
the OpenAI-compatible stand-in (usage and a unique id per completion).

The tests share one database and run in order, as the gateway lives: migrate, keys and spend on
1.91.1 across a restart, then the upgrade to 1.108.7 on the same database. Proxy starts cost
40-70 s each: four in all."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from localhosts.servers.litellm_venv import TESTED_LITELLM, litellm_venv, offline_bundle_dir
from localhosts.servers.litellm_proxy import LitellmProxy, ProxyError, migrate
from localhosts.standins.openai_upstream import OpenAIUpstream
from localhosts.servers.postgres import postgres_database

OLD, NEW = TESTED_LITELLM
PROXY_PORT = 4100
UPSTREAM_PORT = 4119  # this helper's range (LiteLLM 4100-4119)
# USD per token: a 12-token reply costs about 3e-4, so a 1e-4 budget is spent by one request.
INPUT_COST, OUTPUT_COST = 1e-5, 2e-5
TINY_BUDGET = 0.0001


def config_yaml(*, budget_status_429: bool = False) -> str:
    settings = "litellm_settings:\n  budget_exceeded_status_code: 429\n" if budget_status_429 else ""
    return f"""model_list:
  - model_name: coder
    litellm_params:
      model: openai/coder
      api_base: http://127.0.0.1:{UPSTREAM_PORT}/v1
      api_key: none
    model_info:
      input_cost_per_token: {INPUT_COST}
      output_cost_per_token: {OUTPUT_COST}
router_settings:
  disable_cooldowns: true
general_settings:
  # Spend reaches PostgreSQL within a second (default 10 s), so a restart right after keeps it.
  proxy_batch_write_at: 1
{settings}"""


def migrations_in(venv: Path) -> set[str]:
    [folder] = venv.glob("lib/python3*/site-packages/litellm_proxy_extras/migrations")
    return {p.parent.name for p in folder.glob("*/migration.sql")}


@pytest.fixture(scope="module")
def db():
    with postgres_database() as database:
        yield database


@pytest.fixture(scope="module")
def upstream():
    with OpenAIUpstream(UPSTREAM_PORT) as up:
        yield up


@pytest.fixture(scope="module")
def old_venv():
    return litellm_venv(OLD)


@pytest.fixture(scope="module")
def story() -> dict:
    """What the earlier tests leave for the later ones (keys, spend): the same database lives on."""
    return {}


def chat(proxy: LitellmProxy, key: str) -> dict:
    return proxy.post("/v1/chat/completions", {
        "model": "coder", "messages": [{"role": "user", "content": "say ok"}]}, key=key)


def key_info(proxy: LitellmProxy, key: str) -> dict:
    return proxy.get(f"/key/info?key={key}")["info"]


def wait_for(what: str, check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def refused_for_budget(proxy: LitellmProxy, key: str) -> ProxyError | None:
    try:
        chat(proxy, key)
    except ProxyError as e:
        return e
    return None


def test_migrate_sh_applies_every_migration_once_and_records_it(db, old_venv, story):
    first = migrate(old_venv.path, db.url)
    expected = migrations_in(old_venv.path)
    assert (first.applied, first.skipped) == (len(expected), 0)
    assert set(db.psql("SELECT name FROM spear_applied_migrations").splitlines()) == expected
    again = migrate(old_venv.path, db.url)
    assert (again.applied, again.skipped) == (0, len(expected))
    assert int(db.psql("SELECT count(*) FROM information_schema.tables "
                       "WHERE table_name = 'LiteLLM_VerificationToken'")) == 1
    story["timings"] = {"venv_1.91.1_s": old_venv.seconds, "migrate_1.91.1_s": first.seconds,
                        "migrations_1.91.1": first.applied}


# Run in the LiteLLM venv: its generated client drives the offline engine as LiteLLM does.
CLIENT_SCRIPT = r'''
import asyncio, datetime, json, uuid
from prisma import Json, Prisma, errors

async def main():
    db = Prisma()
    await db.connect()
    table = db.litellm_verificationtoken
    out = {}
    token = "spear-test-" + uuid.uuid4().hex
    reset = datetime.datetime(2031, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    await table.create(data={"token": token, "models": ["coder"], "max_budget": 2.5,
                             "metadata": Json({"developer": "ana"}), "budget_duration": "30d",
                             "budget_reset_at": reset, "tpm_limit": 1000})
    try:
        await table.create(data={"token": token})
    except errors.UniqueViolationError as e:
        out["duplicate"] = type(e).__name__
    try:
        await table.find_unique_or_raise(where={"token": "missing-" + token})
    except errors.RecordNotFoundError as e:
        out["missing"] = type(e).__name__
    row = await table.find_unique(where={"token": token})
    out["row"] = {"models": row.models, "max_budget": row.max_budget, "metadata": row.metadata,
                  "budget_reset_at": row.budget_reset_at.isoformat(), "tpm_limit": row.tpm_limit}
    out["found_by_date"] = await table.count(where={"budget_reset_at": {"gt": reset - datetime.timedelta(days=1)}})
    async with db.tx() as tx:
        await tx.litellm_verificationtoken.update(where={"token": token}, data={"spend": 1.0})
    try:
        async with db.tx() as tx:
            await tx.litellm_verificationtoken.update(where={"token": token}, data={"spend": {"increment": 5}})
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    out["spend_after_transactions"] = (await table.find_unique(where={"token": token})).spend
    async with db.batch_() as batch:
        batch.litellm_verificationtoken.update(where={"token": token}, data={"spend": {"increment": 0.25}})
        batch.litellm_verificationtoken.update(where={"token": token}, data={"spend": {"increment": 0.25}})
    out["spend_after_batch"] = (await table.find_unique(where={"token": token})).spend
    # `name[]` and `interval` columns, as LiteLLM's view check (ARRAY_AGG(viewname)) reads them.
    [tables] = await db.query_raw("SELECT ARRAY_AGG(tablename) AS t FROM pg_tables WHERE schemaname = current_schema()")
    out["tables"] = sorted(tables["t"])
    [interval] = await db.query_raw("SELECT interval '30 days' AS d, $1::text AS p", "x")
    out["interval"] = interval
    out["deleted"] = await db.execute_raw('DELETE FROM "LiteLLM_VerificationToken" WHERE token = $1', token)
    await db.disconnect()
    print(json.dumps(out))

asyncio.run(main())
'''


def test_prisma_client_py_maps_engine_errors_and_runs_raw_queries_and_transactions(db, old_venv, tmp_path):
    script = tmp_path / "client.py"
    script.write_text(CLIENT_SCRIPT)
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": db.url,
           "PRISMA_QUERY_ENGINE_BINARY": str(offline_bundle_dir() / "query-engine")}
    run = subprocess.run([str(old_venv.path / "bin" / "python"), str(script)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["duplicate"] == "UniqueViolationError"
    assert out["missing"] == "RecordNotFoundError"
    assert out["row"] == {"models": ["coder"], "max_budget": 2.5, "metadata": {"developer": "ana"},
                          "budget_reset_at": "2031-01-02T03:04:05+00:00", "tpm_limit": 1000}
    assert out["found_by_date"] == 1
    assert out["spend_after_transactions"] == 1.0  # the first committed, the second rolled back
    assert out["spend_after_batch"] == 1.5
    assert {"LiteLLM_VerificationToken", "spear_applied_migrations"} <= set(out["tables"])
    assert out["interval"] == {"d": "30 days", "p": "x"}
    assert out["deleted"] == 1


@pytest.fixture(scope="module")
def old_proxy(db, old_venv, upstream, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("litellm-old")
    with LitellmProxy(old_venv.path, config_yaml(), port=PROXY_PORT, log_dir=log_dir,
                      database_url=db.url) as proxy:
        yield proxy


def test_keys_budgets_and_spend_live_in_postgresql_across_a_proxy_restart(db, old_proxy, upstream, story):
    proxy = old_proxy
    story["timings"]["start_1.91.1_s"] = proxy.last_start_seconds
    # LiteLLM creates its spend views in the background at start, once its check (a name[]
    # column) has read which exist.
    wait_for("LiteLLM's views", lambda: "LiteLLM_VerificationTokenView"
             in db.psql("SELECT viewname FROM pg_views").splitlines())
    ana = proxy.post("/key/generate", {"key_alias": "ana", "models": ["coder"], "max_budget": 25.0,
                                       "budget_duration": "30d", "metadata": {"developer": "ana"}})["key"]
    bob = proxy.post("/key/generate", {"key_alias": "bob", "models": ["coder"],
                                       "max_budget": TINY_BUDGET, "budget_duration": "30d",
                                       "metadata": {"developer": "bob"}})["key"]
    info = key_info(proxy, ana)
    assert (info["models"], info["max_budget"], info["budget_duration"], info["metadata"]) == (
        ["coder"], 25.0, "30d", {"developer": "ana"})
    assert info["budget_reset_at"], "a budget with a duration has its next reset"

    served_before = upstream.completions_served()
    for key in (ana, bob):
        assert chat(proxy, key)["choices"][0]["message"]["content"] == "SPEAR-UPSTREAM-OK"
    assert upstream.completions_served() == served_before + 2
    spend = wait_for("ana's spend recorded", lambda: key_info(proxy, ana)["spend"])
    assert spend == pytest.approx(wait_for("bob's spend", lambda: key_info(proxy, bob)["spend"]))

    updated = proxy.post("/key/update", {"key": ana, "max_budget": 40.0,
                                         "metadata": {"developer": "ana", "team": "core"}})
    assert updated.get("key", ana) == ana
    info = key_info(proxy, ana)
    assert (info["max_budget"], info["metadata"]) == (40.0, {"developer": "ana", "team": "core"})
    assert chat(proxy, ana)["choices"], "the same key still works after the update"

    refused = wait_for("bob refused over budget", lambda: refused_for_budget(proxy, bob))
    assert refused.status == 429
    assert refused.body["error"]["type"] == "budget_exceeded"

    ana_spend = wait_for("ana's second request recorded",
                         lambda: (s := key_info(proxy, ana)["spend"]) > spend and s)
    bob_spend = key_info(proxy, bob)["spend"]
    proxy.stop()
    proxy.start()
    story["timings"]["restart_1.91.1_s"] = proxy.last_start_seconds
    info = key_info(proxy, ana)
    assert info["spend"] == pytest.approx(ana_spend)
    assert (info["max_budget"], info["metadata"]) == (40.0, {"developer": "ana", "team": "core"})
    assert key_info(proxy, bob)["spend"] == pytest.approx(bob_spend)
    assert refused_for_budget(proxy, bob).status == 429

    assert proxy.post("/key/delete", {"keys": [ana]})["deleted_keys"] == [ana]
    with pytest.raises(ProxyError) as revoked:
        chat(proxy, ana)
    assert revoked.value.status == 401
    story.update(bob=bob, bob_spend=bob_spend)


def test_upgrading_litellm_applies_only_the_new_migrations_and_keeps_keys_and_429(
        db, old_venv, old_proxy, upstream, story, tmp_path):
    assert "bob" in story, "needs the key the previous test left over budget"
    old_proxy.stop()
    new_venv = litellm_venv(NEW)
    new_names = migrations_in(new_venv.path) - migrations_in(old_venv.path)
    assert new_names, f"{NEW} adds migrations to {OLD}'s"
    upgraded = migrate(new_venv.path, db.url)
    assert upgraded.applied == len(new_names)
    assert upgraded.skipped == len(migrations_in(new_venv.path) & migrations_in(old_venv.path))
    story["timings"].update({"venv_1.108.7_s": new_venv.seconds, "migrate_upgrade_s": upgraded.seconds,
                             "migrations_new_in_1.108.7": upgraded.applied})

    bob = story["bob"]
    # From 1.108 an over-budget key is refused with 422 unless the config asks for 429, as the
    # gateway's rendered config does: both ways, on the same database.
    for keep_429, status in ((False, 422), (True, 429)):
        log_dir = tmp_path / f"keep-429-{keep_429}"
        log_dir.mkdir()
        with LitellmProxy(new_venv.path, config_yaml(budget_status_429=keep_429), port=PROXY_PORT,
                          log_dir=log_dir, database_url=db.url) as proxy:
            story["timings"][f"start_1.108.7_{status}_s"] = proxy.last_start_seconds
            info = key_info(proxy, bob)
            assert info["spend"] == pytest.approx(story["bob_spend"])
            assert (info["max_budget"], info["metadata"]) == (TINY_BUDGET, {"developer": "bob"})
            refused = refused_for_budget(proxy, bob)
            assert refused is not None and refused.status == status, refused
            assert refused.body["error"]["type"] == "budget_exceeded"
    print("measured:", json.dumps(story["timings"], indent=1))
