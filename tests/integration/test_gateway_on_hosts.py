"""The gateway on real parts: LiteLLM with PostgreSQL and Prisma's WebAssembly query engine on a
local systemd gateway host, `coder` routed through a tunnel unit to a real llama-server serving
the scripted tiny model on a second host, one virtual key per developer.

The scenario tests form one stack and run in file order: each starts from the state the previous
one left. Four proxy starts in all (first up; one change that moves a budget, revokes a
developer and changes a setting; the LiteLLM upgrade; the gateway host re-created from nothing
and its database restored from a backup): each costs 40-70 s on 2 cores.
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
import yaml

from components.gateway.backup import CIPHER
from components.hostops.ssh import Session
from localhosts import local_stack
from localhosts.servers.litellm_venv import UPGRADE_LITELLM as UPGRADE
from spear.harness import CLAUDE_CODE, CODEX, OPENHANDS, QWEN_CODE, developer_key
from spear.rules import GATEWAY_UNIT, SMOKE_ANSWER, tunnel_unit
from localhosts.engine import REPO, Project, engine_env

STACK = "gw"
# Ports no other integration test uses: the hosts share this machine's network.
GATEWAY_SSH, INFERENCE_SSH = 2290, 2291
SERVER_PORT, CLIENT_PORT = 8170, 8171  # llama-server on its host; the tunnel's end on the gateway
PROXY_PORT, DATABASE_PORT = 4040, 25430
MASTER_KEY = "sk-spear-it-master-5d1c0e"
FRONTIER_KEY = "sk-ant-it-frontier-9b7f"
BACKUP_KEY = "it-gw-backup-passphrase-6f1d2c8a9e0b4"
KEEP = 3  # the test's gateway.database.backup.keep
SMOKE = f"end_turn | {SMOKE_ANSWER} | ()"


@pytest.fixture(scope="module")
def backups(tmp_path_factory):
    """The folder of this machine the gateway host's database backups go to."""
    return tmp_path_factory.mktemp("gateway-backups")


@pytest.fixture(scope="module")
def hosts(backups):
    inference = local_stack.start("it-gw-llama", INFERENCE_SSH, fresh=True)
    gateway = local_stack.start_gateway("it-gw", GATEWAY_SSH, versions=(UPGRADE,), fresh=True,
                                        backups=backups)
    yield {"inference": inference, "gateway": gateway}
    local_stack.stop("it-gw-llama", discard=True)
    local_stack.stop("it-gw", discard=True)


def stack_config(hosts: dict[str, Any]) -> dict[str, Any]:
    """The local stack's inference host and gateway, moved to this test's hosts and ports."""
    local = {key.split(":", 1)[1]: value for key, value in yaml.safe_load(
        (REPO / "stacks" / "Pulumi.local.yaml").read_text())["config"].items()
        if not isinstance(value, dict) or "secure" not in value}
    host = copy.deepcopy(local["inferenceHosts"]["local"])
    host["ssh"].update(port=INFERENCE_SSH,
                       privateKeyPath=str(hosts["inference"].private_key_path))
    host["server"]["port"] = SERVER_PORT
    host["backend"] = "gw-it"
    gateway = copy.deepcopy(local["gateway"])
    gateway["ssh"].update(port=GATEWAY_SSH, privateKeyPath=str(hosts["gateway"].private_key_path))
    gateway["listen"]["port"] = PROXY_PORT
    # No seats here, so none of the local stack's HTTPS listener (whose address:port it holds).
    del gateway["listen"]["tls"]
    gateway["database"]["port"] = DATABASE_PORT
    gateway["database"]["backup"]["keep"] = KEEP
    gateway["coder"]["upstreams"] = ["llama"]
    return {
        "backends": {"gw-it": {"kind": "port", "port": CLIENT_PORT}},
        "inferenceHosts": {"llama": host},
        "gateway": gateway,
        "developers": {"ana": {"maxBudget": 25, "budgetDuration": "30d"},
                       "bob": {"maxBudget": 0.02, "budgetDuration": "30d"},
                       "cyn": {"maxBudget": 10, "budgetDuration": "30d"}},
    }


@pytest.fixture(scope="module")
def project(hosts, tmp_path_factory):
    proj = Project(tmp_path_factory.mktemp("gw"), engine_env())
    proj.new_stack(STACK, stack_config(hosts))
    for key, value in (("gatewayMasterKey", MASTER_KEY), ("frontierApiKey", FRONTIER_KEY),
                       ("gatewayBackupKey", BACKUP_KEY)):
        proj.pulumi("config", "set", "--secret", "--stack", STACK, f"spear-fleet:{key}", value)
    return proj


def call(path: str, body: dict[str, Any] | None, headers: dict[str, str],
         method: str = "POST") -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{PROXY_PORT}{path}", method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def chat(key: str, max_tokens: int = 32) -> tuple[int, dict[str, Any]]:
    return call("/v1/chat/completions", {"model": "coder", "max_tokens": max_tokens, "messages": [
        {"role": "user", "content": "Reply with exactly: SPEAR-BACKEND-OK"}]}, bearer(key))


def recorded_spend(key: str, timeout: float = 120) -> float:
    """The key's spend once LiteLLM has written some (it batches spend to the database)."""
    deadline = time.monotonic() + timeout
    while True:
        spend = call(f"/key/info?key={key}", None, bearer(MASTER_KEY), method="GET")[1]["info"]["spend"]
        if spend > 0 or time.monotonic() > deadline:
            assert spend > 0, f"no spend recorded within {timeout} s"
            return spend
        time.sleep(2)


def gateway_session(hosts) -> Session:
    info = hosts["gateway"]
    return Session(info.connection())


def test_up_brings_the_gateway_up_with_a_working_key_for_every_developer(project, hosts):
    update = project.up(STACK)
    assert update.ok, update.output[-8000:]
    gateway = project.outputs(STACK)["gateway"]
    assert gateway["smoke_tests"] == {"ana": SMOKE, "bob": SMOKE, "cyn": SMOKE}
    assert gateway["litellm_version"] == "1.91.1"
    assert gateway["migrations_applied"] > 100  # LiteLLM 1.91.1's extras carry 127
    with gateway_session(hosts) as ssh:
        for unit in (GATEWAY_UNIT, tunnel_unit("llama"), "postgresql@15-spear.service"):
            assert ssh.run(f"systemctl is-active {unit}").stdout.strip() == "active", unit
        # The unit sits in system.slice, like the inference server.
        pid = ssh.run(f"systemctl show -p MainPID --value {GATEWAY_UNIT}").stdout.strip()
        assert f"0::/system.slice/{GATEWAY_UNIT}" in ssh.run(f"cat /proc/{pid}/cgroup").stdout


def test_no_secret_appears_in_state_output_or_on_disk_outside_the_env_files(project, hosts):
    outputs = project.outputs(STACK)
    keys = [developer_key(outputs["harnesses"][dev])
            for dev in ("ana", "bob", "cyn")]
    with gateway_session(hosts) as ssh:
        database_env = ssh.read("/opt/spear-gateway/config/database.env")
        config_yaml = ssh.read("/opt/spear-gateway/config/config.yaml")
        mode = ssh.run("stat -c %a /opt/spear-gateway/config/gateway.env").stdout.strip()
        # The proxy's log: every request spear-fleet made so far (keys made, read, smoke tests).
        journal = ssh.run(f"journalctl -u {GATEWAY_UNIT} --no-pager -o cat").stdout
    password = database_env.split("litellm:", 1)[1].split("@", 1)[0]
    state = project.state_text(STACK)
    preview = project.pulumi("preview", "--stack", STACK, "--diff").stdout
    for secret in (MASTER_KEY, FRONTIER_KEY, password, *keys):
        assert secret not in state
        assert secret not in preview
        assert secret not in config_yaml
        assert secret not in journal
    assert "/key/info" in journal  # the reads are logged, by the key's hash
    assert mode == "600"


def test_a_second_up_changes_nothing(project):
    preview = project.preview(STACK)
    assert set(preview["changeSummary"]) == {"same"}, preview["changeSummary"]


def test_every_harness_reaches_coder_through_the_gateway_in_its_own_dialect(project):
    wiring = project.outputs(STACK)["harnesses"]["ana"]
    # Qwen-Code: OpenAI chat completions with OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL.
    env = wiring[QWEN_CODE]["env"]
    status, answer = call(env["OPENAI_BASE_URL"].removeprefix(f"http://127.0.0.1:{PROXY_PORT}")
                          + "/chat/completions",
                          {"model": env["OPENAI_MODEL"], "max_tokens": 32,
                           "messages": [{"role": "user", "content": "hi"}]},
                          bearer(env["OPENAI_API_KEY"]))
    assert status == 200 and answer["choices"][0]["message"]["content"].strip() == SMOKE_ANSWER
    # OpenHands: LiteLLM-style `openai/coder` against LLM_BASE_URL: the model sent is `coder`.
    env = wiring[OPENHANDS]["env"]
    assert env["LLM_MODEL"] == "openai/coder"
    status, answer = call("/v1/chat/completions", {
        "model": env["LLM_MODEL"].split("/", 1)[1], "max_tokens": 32,
        "messages": [{"role": "system", "content": "You are OpenHands."},
                     {"role": "user", "content": "hi"}]}, bearer(env["LLM_API_KEY"]))
    assert status == 200 and SMOKE_ANSWER in answer["choices"][0]["message"]["content"]
    # Claude Code: Anthropic Messages, the key as a bearer token (ANTHROPIC_AUTH_TOKEN).
    env = wiring[CLAUDE_CODE]["env"]
    status, answer = call("/v1/messages", {
        "model": env["ANTHROPIC_MODEL"], "max_tokens": 32,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        {**bearer(env["ANTHROPIC_AUTH_TOKEN"]), "anthropic-version": "2023-06-01"})
    assert status == 200, answer
    assert answer["type"] == "message" and answer["stop_reason"] == "end_turn"
    assert SMOKE_ANSWER in "".join(part.get("text", "") for part in answer["content"])
    # Codex: OpenAI Responses (wire_api = "responses"), bridged onto chat completions.
    assert 'wire_api = "responses"' in wiring[CODEX]["file"]["content"]
    status, answer = call("/v1/responses", {"model": "coder", "input": "hi",
                                            "max_output_tokens": 32},
                          bearer(wiring[CODEX]["env"]["OWNED_API_KEY"]))
    assert status == 200, answer
    texts = [part["text"] for item in answer["output"] if item.get("type") == "message"
             for part in item["content"] if part.get("type") == "output_text"]
    assert SMOKE_ANSWER in "".join(texts)


def test_no_answered_request_leaves_a_hold_in_the_budget_ledger(hosts):
    with gateway_session(hosts) as ssh:
        rows = ssh.run(f"cd / && runuser -u postgres -- psql -p {DATABASE_PORT} -d litellm -Atc"
                       " \"SELECT settled, count(*) FROM spear_gateway.spear_budget_requests"
                       " GROUP BY settled\"").stdout.split()
    counts = dict(row.split("|") for row in rows)
    assert counts.get("f", "0") == "0", counts  # no hold left behind by an answered request
    assert int(counts["t"]) >= 7  # the smoke tests and the dialects' requests


def test_a_request_whose_worst_case_exceeds_the_budget_is_refused_with_429(project):
    key = developer_key(project.outputs(STACK)["harnesses"]["bob"])
    # 20000 output tokens at 2 USD per million is 0.04 USD: more than bob's 0.02 can hold.
    status, answer = chat(key, max_tokens=20000)
    assert status == 429 and answer["error"]["type"] == "spear_budget_exceeded", answer
    assert chat(key)[0] == 200  # a request that fits still passes


def test_a_budget_raise_a_removed_developer_and_a_setting_are_exactly_that_change(project, hosts):
    before = project.outputs(STACK)["harnesses"]
    # The dialect test's requests were charged (LiteLLM writes spend in batches, seconds later).
    spend_before = recorded_spend(developer_key(before["ana"]))
    config = stack_config(hosts)
    config["developers"]["ana"]["maxBudget"] = 40
    del config["developers"]["cyn"]
    config["gateway"]["coder"]["numRetries"] = 3
    _rewrite(project, config)
    preview = project.preview(STACK)
    ops = {step["urn"].rsplit("::", 1)[1]: step["op"] for step in preview["steps"]
           if step["op"] != "same"}
    # The restart re-runs the remaining developers' smoke tests: nothing else moves.
    assert ops == {"gateway-key-ana": "update", "gateway-key-cyn": "delete",
                   "gateway-smoke-cyn": "delete", "gateway-config": "update",
                   "gateway-service": "update", "gateway-smoke-ana": "update",
                   "gateway-smoke-bob": "update"}, ops
    update = project.up(STACK)
    assert update.ok, update.output[-6000:]
    after = project.outputs(STACK)["harnesses"]
    ana_key = developer_key(after["ana"])
    assert ana_key == developer_key(before["ana"])  # in place: same key
    status, info = call(f"/key/info?key={ana_key}", None, bearer(MASTER_KEY), method="GET")
    assert status == 200 and info["info"]["max_budget"] == 40
    # The proxy restarted for the setting: the key and its spend survived in PostgreSQL (plus
    # the smoke test's own request after the restart).
    assert info["info"]["spend"] >= spend_before
    assert chat(ana_key)[0] == 200
    assert "cyn" not in after
    assert chat(developer_key(before["cyn"]))[0] == 401


def test_a_budget_changed_by_hand_is_drift_that_refresh_shows_and_up_puts_back(project):
    key = developer_key(project.outputs(STACK)["harnesses"]["ana"])
    status, _ = call("/key/update", {"key": key, "max_budget": 1000}, bearer(MASTER_KEY))
    assert status == 200  # someone raised it in the admin UI
    assert project.refresh(STACK).ok
    preview = project.preview(STACK)
    ops = {step["urn"].rsplit("::", 1)[1]: step["op"] for step in preview["steps"]
           if step["op"] != "same"}
    # The key is updated in place; its smoke test runs again with it (a key update's outputs are
    # unknown until it is applied).
    assert ops == {"gateway-key-ana": "update", "gateway-smoke-ana": "update"}, ops
    assert project.up(STACK).ok
    status, info = call(f"/key/info?key={key}", None, bearer(MASTER_KEY), method="GET")
    assert info["info"]["max_budget"] == 40  # the stack's value again, same key


def test_bumping_rotation_gives_a_new_key_and_the_old_one_lasts_its_grace_period(project):
    old = developer_key(project.outputs(STACK)["harnesses"]["ana"])
    spent = call(f"/key/info?key={old}", None, bearer(MASTER_KEY), method="GET")[1]["info"]["spend"]
    project.set_config(STACK, "developers.ana.rotation", 1)
    update = project.up(STACK)
    assert update.ok, update.output[-6000:]
    new = developer_key(project.outputs(STACK)["harnesses"]["ana"])
    assert new != old
    assert chat(new)[0] == 200
    assert chat(old)[0] == 200  # still inside its 24 h grace period
    old_info = call(f"/key/info?key={old}", None, bearer(MASTER_KEY), method="GET")[1]["info"]
    assert old_info["expires"] is not None
    new_info = call(f"/key/info?key={new}", None, bearer(MASTER_KEY), method="GET")[1]["info"]
    assert new_info["spend"] >= spent  # a rotation is not a budget reset


def test_a_litellm_upgrade_reinstalls_applies_only_new_migrations_and_keeps_the_keys(project):
    key = developer_key(project.outputs(STACK)["harnesses"]["ana"])
    applied_before = project.outputs(STACK)["gateway"]["migrations_applied"]
    project.set_config(STACK, "gateway.litellm.version", UPGRADE)
    preview = project.preview(STACK)
    ops = {step["urn"].rsplit("::", 1)[1]: step["op"] for step in preview["steps"]
           if step["op"] != "same"}
    assert ops.get("gateway-litellm") == "replace"
    # migrate.sh runs again: its Command's triggers hold the install key and the version.
    assert ops.get("gateway-migrations") == "replace" and ops.get("gateway-service") == "update"
    assert {name for name in ops if name.startswith("gateway-key-")} == set()
    update = project.up(STACK)
    assert update.ok, update.output[-8000:]
    gateway = project.outputs(STACK)["gateway"]
    assert gateway["litellm_version"] == UPGRADE
    assert 0 < gateway["migrations_applied"] < applied_before  # only the ones 1.108.7 adds
    assert chat(key)[0] == 200
    bob = developer_key(project.outputs(STACK)["harnesses"]["bob"])
    # Still 429 over budget on 1.108 (LiteLLM's own default became 422).
    assert chat(bob, max_tokens=20000)[0] == 429


def key_spend(key: str) -> float:
    return call(f"/key/info?key={key}", None, bearer(MASTER_KEY), method="GET")[1]["info"]["spend"]


def test_the_first_up_took_a_backup_and_the_timer_takes_the_next(project, hosts, backups):
    backup = project.outputs(STACK)["gateway"]["database_backup"]
    assert (backups / backup["first_dump"]).stat().st_mode & 0o777 == 0o600
    with gateway_session(hosts) as ssh:
        assert ssh.run("systemctl is-enabled spear-gateway-backup.timer").stdout.strip() == "enabled"
    # Each start (what the timer starts) adds its own dump. Counted as new files, not as a total:
    # the timer's own daily run fires when a run crosses midnight.
    for _ in range(2):
        time.sleep(1)  # dumps are named by the second
        before = {p.name for p in backups.glob("litellm-*.dump")}
        with gateway_session(hosts) as ssh:
            ssh.run("systemctl start spear-gateway-backup.service")
        assert {p.name for p in backups.glob("litellm-*.dump")} - before


def decrypt(dump, key: str) -> subprocess.CompletedProcess:
    """A dump through the cipher the gateway host wrote it with (components/gateway/backup.py)."""
    return subprocess.run(["openssl", "enc", "-d", *CIPHER, "-pass", "stdin", "-in", str(dump)],
                          input=key.encode() + b"\n", capture_output=True)


def test_every_dump_is_encrypted_with_the_stacks_key_and_only_that_key_opens_it(project, backups):
    # The newest (the first was taken before LiteLLM made its tables).
    dump = sorted(backups.glob("litellm-*.dump"))[-1]
    data = dump.read_bytes()
    assert data.startswith(b"Salted__") and b"LiteLLM_VerificationToken" not in data
    assert b"PGDMP" not in data[:64]  # pg_dump's custom format's magic, which a plain dump has
    opened = decrypt(dump, BACKUP_KEY)
    assert opened.returncode == 0 and opened.stdout.startswith(b"PGDMP")
    listed = subprocess.run(["pg_restore", "--list"], input=opened.stdout, capture_output=True)
    assert b"LiteLLM_VerificationToken" in listed.stdout
    assert not decrypt(dump, "another-passphrase-of-32-characters").stdout.startswith(b"PGDMP")
    state = project.state_text(STACK)
    assert BACKUP_KEY not in state and BACKUP_KEY not in project.pulumi(
        "stack", "output", "--stack", STACK, "--json").stdout


def test_retention_keeps_exactly_the_newest_dumps_across_several_runs(hosts, backups):
    def dumps() -> list[str]:
        return sorted(p.name for p in backups.glob("litellm-*.dump"))

    runs: list[str] = []
    for _ in range(KEEP + 2):
        time.sleep(1)  # dumps are named by the second
        before = set(dumps())
        with gateway_session(hosts) as ssh:
            ssh.run("systemctl start spear-gateway-backup.service")
        [made] = set(dumps()) - before
        runs.append(made)
        assert len(dumps()) <= KEEP and dumps()[-1] == made, (dumps(), runs)
    # The newest KEEP, exactly: every older one deleted, the partial files too.
    assert sorted(p.name for p in backups.glob("litellm-*.dump")) == runs[-KEEP:]
    assert not list(backups.glob(".*.part"))


def test_a_lost_gateway_host_comes_back_from_its_backup_with_every_key_and_its_spend(
        project, hosts, backups):
    harnesses = project.outputs(STACK)["harnesses"]
    keys = {dev: developer_key(harnesses[dev]) for dev in ("ana", "bob")}
    time.sleep(1)  # dumps are named by the second
    with gateway_session(hosts) as ssh:
        # The spend the database holds (LiteLLM writes it in batches), and the dump of it.
        dumped = ssh.run(f"cd / && runuser -u postgres -- psql -p {DATABASE_PORT} -d litellm -At -F ="
                         """ -c 'SELECT key_alias, spend FROM "LiteLLM_VerificationToken"'"""
                         " && systemctl start spear-gateway-backup.service").stdout
    spend = {alias: float(value) for alias, value in
             (line.split("=") for line in dumped.split()) if alias in keys}
    assert spend["bob"] > 0
    dump = sorted(p.name for p in backups.glob("litellm-*.dump"))[-1]
    # The disk is lost: the host is made again from nothing; its backups folder is elsewhere.
    local_stack.stop("it-gw")
    hosts["gateway"] = local_stack.start_gateway("it-gw", GATEWAY_SSH, versions=(UPGRADE,),
                                                 fresh=True, backups=backups)
    project.set_config(STACK, "gateway.database.restoreFrom", dump)
    update = project.up(STACK, "--refresh")
    assert update.ok, update.output[-8000:]
    ops = update.ops()
    assert ops["gateway-postgresql"] == "create"
    assert {ops[name] for name in ops if name.startswith("gateway-key-")} == {"same"}  # kept
    assert project.outputs(STACK)["gateway"]["database_backup"]["restored"] == f"/var/backups/spear-gateway/{dump}"
    # As dumped, or more: the `up` after the restore asked each key's smoke test again, which
    # LiteLLM may have counted already (the float sum may differ from the text in the last digit).
    restored = {dev: key_spend(key) for dev, key in keys.items()}
    assert all(restored[dev] >= spend[dev] * (1 - 1e-9) for dev in keys), (restored, spend)
    assert chat(keys["ana"])[0] == 200
    assert chat(keys["bob"], max_tokens=20000)[0] == 429  # its budget still spent
    assert project.up(STACK).changes().keys() == {"same"}


def test_destroy_removes_the_gateway_units_and_keys(project, hosts):
    assert project.destroy(STACK).ok
    with gateway_session(hosts) as ssh:
        for unit in (GATEWAY_UNIT, tunnel_unit("llama")):
            assert ssh.run(f"test -e /etc/systemd/system/{unit}", check=False).code != 0


def _rewrite(project: Project, config: dict[str, Any]) -> None:
    """Replaces the stack's plain config, keeping its encrypted secrets and salt."""
    path = project.dir / "stacks" / f"Pulumi.{STACK}.yaml"
    doc = yaml.safe_load(path.read_text())
    secrets = {k: v for k, v in doc["config"].items() if isinstance(v, dict) and "secure" in v}
    doc["config"] = {**{f"spear-fleet:{k}": v for k, v in config.items()}, **secrets}
    path.write_text(yaml.safe_dump(doc))

