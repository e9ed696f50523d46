"""config, the gateway and its developers: every bad value under `gateway` and `developers` (and
the gateway's secrets) is refused with the full key, what was given and what is allowed, all at
once and before any resource is registered."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from config.checker import ConfigError
from config.load import parse_stack
from config.schema.gateway import LOOPBACK_LISTEN_TEXT
from config.types import (EXTERNAL_DATABASE, FRONTIER_API_KEY, GATEWAY_MASTER_KEY, GATEWAY_TLS_CERTIFICATE,
                          GATEWAY_TLS_KEY, GATEWAY_BACKUP_KEY, ApiKey,
                          DatabaseBackupPlan, PackageSource)
from tests.support.config_cases import (DELETE, FRONTIER_KEY, GATEWAY, GATEWAY_SECRETS as SECRETS,
                                        MASTER_KEY, allowed_for, changed, gateway_raw,
                                        problem_line, reds_raw, repeated_cases, run_program)
from spear import harness
from tests.support.stack_files import engine_config, prod_raw, stack_raw

ANA = ("developers", "ana")
DATABASE_URL = "postgresql://litellm:pw-SECRET@db.internal:5432/litellm"


def with_reds_upstream(name: str) -> dict[str, Any]:
    """The gateway over prod's REDS endpoints, routing `coder` to one of them."""
    raw = {**reds_raw(), **{k: v for k, v in gateway_raw().items() if k not in reds_raw()}}
    raw["sshPrivateKeys"]["gateway"] = gateway_raw()["sshPrivateKeys"]["gateway"]
    return changed(raw, (*GATEWAY, "coder", "upstreams"), [name])


def developers_only() -> dict[str, Any]:
    return {**prod_raw(), "developers": copy.deepcopy(gateway_raw()["developers"])}


# (id, config, full key without the namespace, a fragment of what is allowed)
BAD = [
    ("litellm-version", changed(gateway_raw(), (*GATEWAY, "litellm", "version"), "latest"),
     "gateway.litellm.version", "a LiteLLM release X.Y.Z (litellm[proxy]==X.Y.Z is installed)"),
    ("litellm-index-and-wheelhouse",
     changed(gateway_raw(), (*GATEWAY, "litellm", "wheelhouse"), "/var/cache/wheels"),
     "gateway.litellm", "at most one of indexUrl (a package index) or wheelhouse"),
    ("litellm-index-plain-http",
     changed(gateway_raw(), (*GATEWAY, "litellm", "indexUrl"), "http://pypi.internal/simple"),
     "gateway.litellm.indexUrl", "an https URL (http only on a loopback address"),
    ("upstream-unknown", changed(gateway_raw(), (*GATEWAY, "coder", "upstreams"), ["pilot"]),
     "gateway.coder.upstreams[0]", "a non-empty list of declared endpoints (inferenceHosts,"
     " runpod.pods, redsEndpoints, vllmFleet): reds"),
    ("upstream-none", changed(gateway_raw(), (*GATEWAY, "coder", "upstreams"), []),
     "gateway.coder.upstreams", "a non-empty list of declared endpoints"),
    ("upstream-twice", changed(gateway_raw(), (*GATEWAY, "coder", "upstreams"), ["reds", "reds"]),
     "gateway.coder.upstreams[1]", "each endpoint once"),
    ("upstream-keyless-reds", with_reds_upstream("box"),
     "gateway.coder.upstreams[0]", "an endpoint with a key the gateway host can use for its"
     " tunnel: redsEndpoints.box.ssh.privateKeyPath or sshPrivateKeys.box"),
    ("database-external-without-url",
     changed(gateway_raw(), (*GATEWAY, "database", "location"), EXTERNAL_DATABASE),
     "gatewayDatabaseUrl", "a secret (required with gateway.database.location external)"),
    ("database-url-with-local-database", {**gateway_raw(), "gatewayDatabaseUrl": DATABASE_URL},
     "gatewayDatabaseUrl", "no gatewayDatabaseUrl, or gateway.database.location external"),
    ("database-location", changed(gateway_raw(), (*GATEWAY, "database", "location"), "cloud"),
     "gateway.database.location", "one of local, external"),
    ("query-engine", changed(gateway_raw(), (*GATEWAY, "database", "queryEngine"), "binary"),
     "gateway.database.queryEngine", "one of native, offline"),
    ("backup-relative-folder",
     changed(gateway_raw(), (*GATEWAY, "database", "backup"), {"folder": "backups"}),
     "gateway.database.backup.folder", "an absolute folder on the gateway host that outlives it"),
    ("backup-keep-zero",
     changed(gateway_raw(), (*GATEWAY, "database", "backup"), {"folder": "/mnt/b", "keep": 0}),
     "gateway.database.backup.keep", "1"),
    ("backup-calendar-shell",
     changed(gateway_raw(), (*GATEWAY, "database", "backup"),
             {"folder": "/mnt/b", "onCalendar": "daily; rm -rf /"}),
     "gateway.database.backup.onCalendar", "a systemd calendar expression"),
    ("backup-of-external-database",
     changed(changed(gateway_raw(), (*GATEWAY, "database", "location"), EXTERNAL_DATABASE),
             (*GATEWAY, "database", "backup"), {"folder": "/mnt/b"}),
     "gateway.database.backup", "no backup with gateway.database.location external"),
    ("restore-without-backup",
     changed(changed(gateway_raw(), (*GATEWAY, "database", "backup"), DELETE),
             (*GATEWAY, "database", "restoreFrom"), "litellm-20261201T030000Z.dump"),
     "gateway.database.restoreFrom", "a dump in gateway.database.backup.folder (declare the backup)"),
    ("restore-not-a-dump",
     changed(changed(gateway_raw(), (*GATEWAY, "database", "backup"), {"folder": "/mnt/b"}),
             (*GATEWAY, "database", "restoreFrom"), "../../etc/shadow"),
     "gateway.database.restoreFrom", "litellm-<YYYYMMDD>T<HHMMSS>Z.dump"),
    ("hatch-alert-at-cap", changed(gateway_raw(), (*GATEWAY, "hatch", "alertUsd"), 200),
     "gateway.hatch.alertUsd", "an amount below gateway.hatch.monthlyCapUsd (200.0): the alert"
     " must fire before the cap shuts the hatch"),
    ("hatch-alert-above-cap", changed(gateway_raw(), (*GATEWAY, "hatch", "alertUsd"), 250),
     "gateway.hatch.alertUsd", "an amount below gateway.hatch.monthlyCapUsd"),
    ("hatch-cap-zero", changed(gateway_raw(), (*GATEWAY, "hatch", "monthlyCapUsd"), 0),
     "gateway.hatch.monthlyCapUsd", "an amount in USD greater than 0"),
    ("hatch-model-missing", changed(gateway_raw(), (*GATEWAY, "hatch", "model"), DELETE),
     "gateway.hatch.model", "the frontier provider's model id"),
    ("hatch-api-plain-http",
     changed(gateway_raw(), (*GATEWAY, "hatch", "apiBase"), "http://api.anthropic.com"),
     "gateway.hatch.apiBase", "an https URL"),
    ("retries-too-many", changed(gateway_raw(), (*GATEWAY, "coder", "numRetries"), 11),
     "gateway.coder.numRetries", "an integer 0-10"),
    ("price-zero", changed(gateway_raw(), (*GATEWAY, "coder", "pricePerMillionTokensUsd", "input"),
                           0),
     "gateway.coder.pricePerMillionTokensUsd.input", "an amount in USD greater than 0"),
    ("gateway-unknown-key", changed(gateway_raw(), (*GATEWAY, "fallbacks"), ["frontier"]),
     "gateway.fallbacks", "one of name, ssh, kubernetes, runtimeDir, listen, litellm, database, coder, hatch"),
    ("gateway-named-like-a-host", changed(gateway_raw(), (*GATEWAY, "name"), "reds"),
     "gateway.name", "a name no inference host, pod or REDS endpoint has"),
    ("gateway-ssh-missing", changed(gateway_raw(), (*GATEWAY, "ssh"), DELETE),
     "gateway.ssh", "an object with keys host, port, user, privateKeyPath, hostKey (required)"),
    ("listen-host", changed(gateway_raw(), (*GATEWAY, "listen", "host"), "gateway"),
     "gateway.listen.host", "a loopback address such as 127.0.0.1 (plain HTTP stays on the"
     " gateway host; others reach it by name over TLS at gateway.listen.tls)"),
    # Plain HTTP only on loopback.
    ("listen-host-off-loopback", changed(gateway_raw(), (*GATEWAY, "listen", "host"), "10.20.0.10"),
     "gateway.listen.host", LOOPBACK_LISTEN_TEXT),
    ("master-key-missing", changed(gateway_raw(), (GATEWAY_MASTER_KEY,), DELETE),
     GATEWAY_MASTER_KEY, "a secret (required with gateway): pulumi config set --secret"
     " gatewayMasterKey < file"),
    ("frontier-key-missing", changed(gateway_raw(), (FRONTIER_API_KEY,), DELETE),
     FRONTIER_API_KEY, "a secret (required with gateway)"),
    ("developer-without-budget-duration", changed(gateway_raw(), (*ANA, "budgetDuration"), DELETE),
     "developers.ana.budgetDuration", 'a window like "30s", "30m", "24h", "30d" or "1mo" (required:'
     " a budget without one never resets and locks the developer out once spent)"),
    ("developer-budget-duration-words", changed(gateway_raw(), (*ANA, "budgetDuration"), "monthly"),
     "developers.ana.budgetDuration", 'a window like "30s"'),
    ("developer-max-budget-zero", changed(gateway_raw(), (*ANA, "maxBudget"), 0),
     "developers.ana.maxBudget", "an amount in USD greater than 0"),
    ("developer-max-budget-not-a-number", changed(gateway_raw(), (*ANA, "maxBudget"), "12,50"),
     "developers.ana.maxBudget", "an amount in USD greater than 0"),
    ("developer-max-budget-missing", changed(gateway_raw(), (*ANA, "maxBudget"), DELETE),
     "developers.ana.maxBudget", "an amount in USD greater than 0 (required)"),
    # The rule (spear/rules.py::developer_key_problems) decides the budget alone: NaN and
    # infinity, which a YAML float can be, are refused by it too.
    ("developer-max-budget-nan", changed(gateway_raw(), (*ANA, "maxBudget"), float("nan")),
     "developers.ana.maxBudget", "an amount in USD greater than 0"),
    ("developer-max-budget-infinite", changed(gateway_raw(), (*ANA, "maxBudget"), float("inf")),
     "developers.ana.maxBudget", "an amount in USD greater than 0"),
    ("developer-models-frontier", changed(gateway_raw(), (*ANA, "models"), ["frontier"]),
     "developers.ana.models[0]", "a non-empty list of the gateway's model names other than"
     " frontier (the hatch is reached by escalation only): coder"),
    ("developer-models-unknown", changed(gateway_raw(), (*ANA, "models"), ["coder", "gpt-5"]),
     "developers.ana.models[1]", "other than frontier"),
    ("developer-models-empty", changed(gateway_raw(), (*ANA, "models"), []),
     "developers.ana.models", "a non-empty list of the gateway's model names"),
    ("developer-rpm-zero", changed(gateway_raw(), (*ANA, "rpmLimit"), 0),
     "developers.ana.rpmLimit", "an integer >= 1"),
    ("developer-metadata", changed(gateway_raw(), (*ANA, "metadata"), {"owner": ["a", "b"]}),
     "developers.ana.metadata", "a map of names to one-line strings"),
    ("developer-unknown-key", changed(gateway_raw(), (*ANA, "budget"), 25),
     "developers.ana.budget", "one of team, models, maxBudget, budgetDuration"),
    ("developer-name", changed(gateway_raw(), ("developers", "Ana"), {"maxBudget": 1}),
     "developers.Ana", "a name of lowercase letters"),
    ("developers-without-gateway", developers_only(),
     "developers", "developers only with `gateway` (their keys live there)"),
    ("secret-without-gateway", {**prod_raw(), "gatewayMasterKey": MASTER_KEY},
     GATEWAY_MASTER_KEY, "set only with `gateway`"),
    ("harness-version-range", {**gateway_raw(), "harnesses": {"codex": "^0.169.0"}},
     "harnesses.codex", "an exact version such as 1.2.3 or 1.2.3-beta.1 (no range, tag or"),
    ("harness-version-tag", {**gateway_raw(), "harnesses": {"claude-code": "latest"}},
     "harnesses.claude-code", "'latest': the stack pins what developers run)"),
    ("harness-version-number", {**gateway_raw(), "harnesses": {"openhands": 1.16}},
     "harnesses.openhands", "an exact version such as 1.2.3"),
    ("harness-unknown", {**gateway_raw(), "harnesses": {"cursor": "1.0.0"}},
     "harnesses.cursor", "one of qwen-code, openhands, claude-code, codex"),
    ("harnesses-not-an-object", {**gateway_raw(), "harnesses": "0.24.4"},
     "harnesses", "an object with keys qwen-code, openhands, claude-code, codex"),
    ("harness-version-unlocked", {**gateway_raw(), "harnesses": {"codex": "0.171.0"}},
     "harnesses.codex", "a version with its lockfile committed: `scripts/harness-lock codex 0.171.0`"
                        " writes it"),
    ("harnesses-without-gateway", {**prod_raw(), "harnesses": {"codex": "0.169.0"}},
     "harnesses", "harnesses only with `gateway` (the harnesses are wired to it)"),
]


@pytest.mark.parametrize("raw,key,allowed", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_value_is_refused_naming_key_and_allowed(mocks, raw, key, allowed):
    secrets = SECRETS + ["spear-fleet:gatewayDatabaseUrl"]
    assert allowed in allowed_for(mocks, raw, key, secrets)


def test_no_two_bad_gateway_cases_share_an_id_or_a_refusal():
    assert repeated_cases(BAD) == []


def test_each_harness_takes_the_stacks_exact_version_and_the_others_their_default():
    cfg = parse_stack({**gateway_raw(), "harnesses": {"codex": "0.170.0"}})
    assert cfg.harnesses == {**harness.DEFAULT_VERSIONS, "codex": "0.170.0"}
    assert parse_stack(gateway_raw()).harnesses == harness.DEFAULT_VERSIONS


def test_the_local_stack_pins_every_harness_at_the_measured_version():
    assert parse_stack(stack_raw("local")).harnesses == {"qwen-code": "0.24.4", "claude-code": "2.1.328",
                                              "codex": "0.169.0", "openhands": "1.16.0"}


def test_the_prod_example_parses_to_the_gateway_and_its_developers():
    cfg = parse_stack(gateway_raw())
    gateway = cfg.gateway
    assert (gateway.name, gateway.ssh.address, gateway.litellm_version) == (
        "gateway", "gateway.internal:22", "1.91.1")
    assert gateway.packages == PackageSource("https://pypi.org/simple", None)
    assert gateway.upstreams == ("reds",)
    assert (gateway.hatch.monthly_cap_usd, gateway.hatch.alert_usd) == (200.0, 150.0)
    assert gateway.database.backup == DatabaseBackupPlan("/mnt/backups/spear-gateway", "daily", 14)
    assert gateway.pricing.output_usd_per_token == pytest.approx(2.0e-6)
    assert {name: (d.models, d.max_budget, d.budget_duration) for name, d in cfg.developers.items()} \
        == {"ana": (("coder",), 25.0, "30d"), "bob": (("coder",), 25.0, "30d")}
    assert cfg.api_keys[GATEWAY_MASTER_KEY] == ApiKey(MASTER_KEY)
    assert cfg.api_keys[FRONTIER_API_KEY] == ApiKey(FRONTIER_KEY)


def test_a_backup_takes_its_defaults_and_a_restore_names_a_dump_in_its_folder():
    raw = changed(gateway_raw(), (*GATEWAY, "database", "backup"), {"folder": "/mnt/backups"})
    database = parse_stack(changed(raw, (*GATEWAY, "database", "restoreFrom"),
                             "litellm-20261201T030000Z.dump")).gateway.database
    assert database.backup == DatabaseBackupPlan(folder="/mnt/backups", on_calendar="daily", keep=7)
    assert database.restore_from == "litellm-20261201T030000Z.dump"
    without = changed(gateway_raw(), (*GATEWAY, "database", "backup"), DELETE)
    assert parse_stack(without).gateway.database.backup is None


def test_an_external_database_takes_its_url_as_a_secret_never_echoed():
    raw = changed(changed(gateway_raw(), (*GATEWAY, "database", "backup"), DELETE),
                  (*GATEWAY, "database", "location"), EXTERNAL_DATABASE)
    cfg = parse_stack({**raw, "gatewayDatabaseUrl": DATABASE_URL})
    assert cfg.gateway.database.location == EXTERNAL_DATABASE
    assert "pw-SECRET" not in repr(cfg)
    with pytest.raises(ConfigError) as error:
        parse_stack({**raw, "gatewayDatabaseUrl": "mysql://root:pw-SECRET@db/x"})
    # Reported once, as what it is (not also as missing).
    assert [p.key for p in error.value.problems] == ["spear-fleet:gatewayDatabaseUrl"]
    assert problem_line(error.value, "gatewayDatabaseUrl").endswith(
        "got a secret of 27 characters that is not a PostgreSQL URL; allowed:"
        " postgresql://user:password@host:port/database")
    assert "pw-SECRET" not in str(error.value)


@pytest.mark.parametrize("secret", ["gatewayMasterKey", "frontierApiKey"])
def test_gateway_secrets_given_in_plain_text_are_refused_by_load(mocks, secret):
    plain = [key for key in SECRETS if key != f"spear-fleet:{secret}"]
    assert allowed_for(mocks, gateway_raw(), secret, plain) == (
        f"a secret: pulumi config set --secret {secret} < file")


def test_load_hands_the_gateway_secrets_on_as_pulumi_secrets(mocks):
    [stack, *_] = run_program(engine_config(gateway_raw()), SECRETS)
    assert stack.config.gateway is not None
    assert set(stack.api_keys) == {GATEWAY_MASTER_KEY, FRONTIER_API_KEY, GATEWAY_TLS_CERTIFICATE,
                                   GATEWAY_TLS_KEY, GATEWAY_BACKUP_KEY}
    assert set(stack.ssh_keys) == {"reds", "gateway"}


def test_all_problems_are_reported_at_once_one_per_line():
    raw = changed(gateway_raw(), (*GATEWAY, "litellm", "version"), "latest")
    raw = changed(raw, (*GATEWAY, "coder", "upstreams"), ["pilot"])
    raw = changed(raw, (*GATEWAY, "hatch", "alertUsd"), 300)
    raw = changed(raw, (*ANA, "budgetDuration"), DELETE)
    raw = changed(raw, (*ANA, "models"), ["frontier"])
    raw = changed(raw, ("developers", "bob", "maxBudget"), 0)
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert [problem.key for problem in error.value.problems] == [
        "spear-fleet:gateway.litellm.version",
        "spear-fleet:gateway.coder.upstreams[0]",
        "spear-fleet:gateway.hatch.alertUsd",
        "spear-fleet:developers.ana.models[0]",
        "spear-fleet:developers.ana.budgetDuration",
        "spear-fleet:developers.bob.maxBudget",
    ]
    assert str(error.value).splitlines()[1:] == [str(problem) for problem in error.value.problems]
