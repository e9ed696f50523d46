"""The inference host on real parts: the real engine deploys the project to a real systemd host
(an nspawn container booted for this module) with llama-server built from source on it and a
tiny real model, and every upgrade path is driven through `pulumi up`.

The tests form one scenario on one stack and run in file order: each starts from the state the
previous one left.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from spear.smoke import EXPECTED_TEXT
from components.hostops.known_hosts import fingerprint
from components.hostops.ssh import Session
from review.parts import overall, parts
from localhosts.hosts import llama_source
from localhosts import local_stack
from localhosts.standins import tiny_model
from localhosts.hosts.host import renew_host_key
from localhosts.engine import Project, engine_env
from tests.support import faults
from tests.support.stack_files import local_inference_hosts


HOST = "it-inference"
SSH_PORT = 2231
# Not the local stack's 8010: the hosts share this machine's loopback, and the `local` host may be up.
SERVER_PORT = 8110
STACK = "it"
UNIT = "spear-inference.service"
SMOKE = f"end_turn | {EXPECTED_TEXT} | ()"


@pytest.fixture(scope="module")
def host():
    info = local_stack.start(HOST, SSH_PORT, fresh=True)
    yield info
    local_stack.stop(HOST, discard=True)


@pytest.fixture(scope="module")
def ssh(host):
    connection = host.connection()
    with Session(connection) as session:
        yield session


@pytest.fixture(scope="module")
def project(host, tmp_path_factory):
    proj = Project(tmp_path_factory.mktemp("inference"), engine_env())
    config = local_inference_hosts()
    served = config["inferenceHosts"]["local"]
    served["ssh"]["port"] = SSH_PORT
    served["ssh"]["privateKeyPath"] = str(host.private_key_path)
    served["server"]["port"] = SERVER_PORT
    proj.new_stack(STACK, config)
    return proj


def host_outputs(project: Project) -> dict[str, Any]:
    """The stack outputs of the one inference host."""
    return project.outputs(STACK)["inference_hosts"]["local"]


def unit_state(ssh: Session) -> dict[str, str]:
    shown = ssh.run(f"systemctl show -p ActiveState -p MainPID {UNIT}").stdout
    return dict(line.split("=", 1) for line in shown.split())


def build_marker(ssh: Session, key: str) -> str:
    return ssh.run(f"stat -c %Y /opt/spear/builds/{key}/.complete").stdout.strip()


def test_up_on_a_fresh_host_serves_and_passes_the_smoke_test(project, ssh):
    preview = project.preview(STACK)
    assert preview["changeSummary"] == {"create": 10}
    update = project.up(STACK)
    assert update.ok, update.output
    assert update.changes() == {"create": 10}
    out = host_outputs(project)
    assert out["smoke_test"] == SMOKE
    assert out["cgroup"] == f"0::/system.slice/{UNIT}"
    assert "version" in out["llama_server_version"]
    # The same facts, read on the host itself.
    state = unit_state(ssh)
    assert state["ActiveState"] == "active"
    assert f"0::/system.slice/{UNIT}" in ssh.run(f"cat /proc/{state['MainPID']}/cgroup").stdout.splitlines()
    assert ssh.run("systemctl is-enabled spear-inference").stdout.strip() == "enabled"
    status, body = ssh.http(SERVER_PORT, "GET", "/health")
    assert status == 200, body
    assert ssh.run("readlink /opt/spear/current").stdout.strip() == f"/opt/spear/builds/{out['build_key']}"
    manifest = json.loads(ssh.read("/opt/spear/models/manifest.json"))
    assert [s["sha256"] for s in manifest["shards"]] == [local_inference_hosts()["inferenceHosts"]["local"]["model"]["shards"][0]["sha256"]]


def review(project: Project) -> tuple[str, dict[str, str]]:
    """What the preview summary tells a reviewer: the overall line, and each part's class."""
    found = parts(project.preview(STACK))
    return overall(found), {p.resource: p.change for p in found}


def test_a_second_up_changes_nothing(project):
    assert review(project)[0] == "no changes"
    update = project.up(STACK)
    assert update.ok, update.output
    assert update.changes() == {"same": 10}


def test_the_ssh_key_is_secret_in_state(project, host):
    key_body = host.private_key_path.read_text().splitlines()[1]
    assert key_body not in project.state_text(STACK)
    assert key_body not in project.pulumi("preview", "--stack", STACK, "--diff").stdout


def restarts_without_rebuilding(project: Project, ssh: Session, path: str, value: Any,
                                summary: str, part: str, change: str) -> None:
    """Sets one config value; the preview summary, the update and the host must all show a
    restart of the server, the named part changed in place, and the build untouched."""
    key = host_outputs(project)["build_key"]
    built = build_marker(ssh, key)
    pid_before = unit_state(ssh)["MainPID"]
    project.set_config(STACK, path, value)
    line, changes = review(project)
    assert line == summary
    assert changes[part] == change
    update = project.up(STACK)
    assert update.ok, update.output
    ops = update.ops()
    assert ops[part] == "update"
    assert ops["local-unit"] == "update"
    assert ops["local-llama-server"] == "same"
    assert unit_state(ssh)["MainPID"] != pid_before
    assert build_marker(ssh, key) == built
    assert host_outputs(project)["smoke_test"] == SMOKE


def test_a_new_context_size_restarts_without_rebuilding(project, ssh):
    restarts_without_rebuilding(project, ssh, "inferenceHosts.local.server.ctxSize", 384,
                                "restart, no rebuild", "local-server-conf", "config only (restart)")
    assert "SPEAR_SERVER_CTX=384" in ssh.read("/opt/spear/config/server.conf")
    assert "--ctx-size\n384" in "\n".join(host_outputs(project)["command_line"])


def test_a_new_model_re_verifies_and_restarts_without_rebuilding(project, ssh):
    restarts_without_rebuilding(project, ssh, "inferenceHosts.local.model.shards[0].name",
                                "spear-smoke-renamed.gguf", "restart, no rebuild (after a model re-fetch)",
                                "local-model", "model re-fetch")
    files = ssh.run("ls /opt/spear/models/gguf").stdout.split()
    assert files == ["spear-smoke-renamed.gguf"]  # the shard the manifest dropped is gone


def test_an_unreadable_adapter_serves_the_base_model(project, ssh):
    project.set_config(STACK, "inferenceHosts.local.model.adapter", "missing-adapter.gguf")
    update = project.up(STACK)
    assert update.ok, update.output
    assert host_outputs(project)["smoke_test"] == SMOKE
    journal = ssh.run(f"journalctl -u {UNIT} -o cat --no-pager").stdout
    assert ("serve.sh: adapter not readable: /opt/spear/models/lora/missing-adapter.gguf;"
            " serving the base model") in journal
    # serve.sh's documented fallback (seed 6.2.5) is not drift: a refresh leaves the unit alone.
    assert project.refresh(STACK).ops().get("local-unit") == "same"
    project.set_config(STACK, "inferenceHosts.local.model.adapter", "none")
    assert project.up(STACK).ok


def test_refresh_notices_a_hand_edited_server_conf(project, ssh):
    conf = ssh.read("/opt/spear/config/server.conf")
    ssh.write("/opt/spear/config/server.conf", conf.replace("SPEAR_SERVER_THREADS=2", "SPEAR_SERVER_THREADS=1"))
    refresh = project.refresh(STACK)
    assert refresh.ok, refresh.output
    assert refresh.ops().get("local-server-conf") == "update"
    preview = project.preview(STACK)
    assert preview["changeSummary"].get("update", 0) >= 1
    assert project.up(STACK).ok
    assert ssh.read("/opt/spear/config/server.conf") == conf


def test_an_unreadable_model_fails_the_update_with_serve_sh_message(project, ssh):
    model = "/opt/spear/models/gguf/spear-smoke-renamed.gguf"
    ssh.run(f"rm {model}")
    project.set_config(STACK, "inferenceHosts.local.server.ctxSize", 512)  # any change that restarts the server
    update = project.up(STACK)
    assert not update.ok
    assert f"serve.sh: model not readable: {model}" in update.output
    assert f"{UNIT} did not stay up" in update.output
    # The way back: refresh sees the shard gone, and the next up fetches it again.
    assert project.refresh(STACK).ok
    update = project.up(STACK)
    assert update.ok, update.output
    assert host_outputs(project)["smoke_test"] == SMOKE


def main_args(ssh: Session) -> list[str]:
    """The arguments of the unit's main process (llama-server: serve.sh execs it), from
    /proc/<MainPID>/cmdline."""
    return ssh.run(f"cat /proc/{unit_state(ssh)['MainPID']}/cmdline").stdout.split("\0")[1:-1]


def test_refresh_notices_a_server_restarted_by_hand_with_other_settings_and_up_restarts_it(project, ssh):
    conf = ssh.read("/opt/spear/config/server.conf")
    ctx = re.search(r"^SPEAR_SERVER_CTX=(\d+)$", conf, re.M).group(1)  # the stack's
    ssh.write("/opt/spear/config/server.conf", conf.replace(f"SPEAR_SERVER_CTX={ctx}", "SPEAR_SERVER_CTX=384"))
    ssh.run(f"systemctl restart {UNIT} && for i in $(seq 120); do"
            f" curl -fs http://127.0.0.1:{SERVER_PORT}/health >/dev/null && exit 0; sleep 0.5; done; exit 1")
    args = main_args(ssh)
    assert args[args.index("--ctx-size") + 1] == "384"
    refresh = project.refresh(STACK)
    assert refresh.ok, refresh.output
    assert refresh.ops().get("local-unit") == "update"
    assert review(project)[1]["local-unit"] == "config only (restart)"
    update = project.up(STACK)
    assert update.ok, update.output
    assert update.ops()["local-unit"] == "update"
    args = main_args(ssh)
    assert args[args.index("--ctx-size") + 1] == ctx
    assert ssh.read("/opt/spear/config/server.conf") == conf
    assert host_outputs(project)["smoke_test"] == SMOKE


def test_an_edited_build_script_rebuilds(project, ssh):
    old_key = host_outputs(project)["build_key"]
    script = project.dir / "hosts" / "inference" / "build-llama-server.sh"
    # A fixed edit: the next run of this test finds its build in the shared cache.
    script.write_text(script.read_text() + "# edited by spear-fleet's tests\n")
    found = {p.resource: p for p in parts(project.preview(STACK))}
    assert overall(list(found.values())) == "rebuild and restart"
    assert found["local-llama-server"].change == "rebuild"
    assert "build-llama-server.sh changed" in found["local-llama-server"].details
    update = project.up(STACK)
    assert update.ok, update.output
    assert update.ops()["local-llama-server"] == "replace"
    assert update.ops()["local-unit"] == "update"
    new_key = host_outputs(project)["build_key"]
    assert new_key != old_key
    assert ssh.read(f"/opt/spear/builds/{new_key}/build-llama-server.sh") == script.read_text()
    assert ssh.run("readlink /opt/spear/current").stdout.strip() == f"/opt/spear/builds/{new_key}"
    assert host_outputs(project)["smoke_test"] == SMOKE


def _repacked_source(dest: Path) -> tuple[Path, str]:
    """The same llama.cpp tree in a new archive (one extra file): a new source pin."""
    archive = llama_source.ensure_source_archive()
    with tarfile.open(archive.path) as src, gzip.open(dest, "wb", compresslevel=1) as raw, \
            tarfile.open(fileobj=raw, mode="w") as out:
        for member in src:
            out.addfile(member, src.extractfile(member) if member.isfile() else None)
        note = b"repacked by spear-fleet's tests\n"
        info = tarfile.TarInfo(f"{archive.subdir}/SPEAR-REPACK-NOTE")
        info.size = len(note)
        out.addfile(info, io.BytesIO(note))
    return dest, llama_source.file_sha256(dest)


def test_a_new_source_rebuilds(project, ssh, tmp_path):
    old_key = host_outputs(project)["build_key"]
    path, sha = _repacked_source(tmp_path / "llama-repacked.tar.gz")
    project.set_config(STACK, "inferenceHosts.local.llamaCpp.source.archive", str(path))
    project.set_config(STACK, "inferenceHosts.local.llamaCpp.source.sha256", sha)
    preview = project.preview(STACK)
    assert preview["changeSummary"].get("replace") == 1
    line, changes = review(project)
    assert line == "rebuild and restart"
    assert changes["local-llama-server"] == "rebuild"
    update = project.up(STACK)
    assert update.ok, update.output
    assert update.ops()["local-llama-server"] == "replace"
    new_key = host_outputs(project)["build_key"]
    assert new_key != old_key
    assert ssh.run(f"test -f /opt/spear/builds/{new_key}/.complete && test -f /opt/spear/builds/{new_key}/src/"
                   f"{llama_source.SUBDIR}/SPEAR-REPACK-NOTE").code == 0
    assert ssh.run("readlink /opt/spear/current").stdout.strip() == f"/opt/spear/builds/{new_key}"
    assert host_outputs(project)["smoke_test"] == SMOKE


def test_another_server_on_the_port_fails_the_update(project, ssh):
    # Something else answers /health on the server's port: its answer must not pass for ours.
    ssh.run("systemctl stop spear-inference && mkdir -p /tmp/impostor && echo ok > /tmp/impostor/health"
            f" && systemd-run --unit impostor python3 -m http.server {SERVER_PORT} --bind 127.0.0.1"
            " --directory /tmp/impostor")
    try:
        project.set_config(STACK, "inferenceHosts.local.server.threads", 1)
        update = project.up(STACK)
        assert not update.ok
        assert f"{UNIT} did not stay up" in update.output
        assert "bind" in update.output  # llama-server's own words, from the journal
    finally:
        ssh.run("systemctl stop impostor")
    project.set_config(STACK, "inferenceHosts.local.server.threads", 2)
    update = project.up(STACK)
    assert update.ok, update.output
    assert host_outputs(project)["smoke_test"] == SMOKE


def test_a_template_without_tool_calls_fails_the_update_with_the_parser_trap(project):
    # The parser-trap model answers with tool-call markup; served with a template that has no
    # tool calls, the engine leaves that markup in the text (seed 001 step 4's trap).
    trap = tiny_model.ensure_model(tiny_model.TOOL_CALL_ANSWER)
    stack_file = project.dir / "stacks" / f"Pulumi.{STACK}.yaml"
    serve = project.dir / "hosts" / "inference" / "serve.sh"
    saved = stack_file.read_text(), serve.read_text()
    assert "args+=(--jinja)\n" in saved[1]
    doc = yaml.safe_load(saved[0])
    doc["config"]["spear-fleet:inferenceHosts"]["local"]["model"]["shards"] = [
        {"name": "spear-trap.gguf", "size": trap.stat().st_size,
         "sha256": llama_source.file_sha256(trap), "source": str(trap)}]
    stack_file.write_text(yaml.safe_dump(doc))
    serve.write_text(saved[1].replace("args+=(--jinja)\n", "args+=(--jinja --chat-template chatml)\n"))
    try:
        update = project.up(STACK)
        assert not update.ok
        assert "endpoint local: tool-call probe failed: parser-not-configured" in update.output
    finally:
        stack_file.write_text(saved[0])
        serve.write_text(saved[1])
    update = project.up(STACK)
    assert update.ok, update.output
    assert host_outputs(project)["verified"] == ["model-list", "completion", "tool-call"]
    assert host_outputs(project)["smoke_test"] == SMOKE


def restart_with_fault(project: Project, ctx_size: int, fault) -> subprocess.Popen:
    """Starts an `up` that restarts the server (a new context size) and, once the unit runs its
    new process, injects `fault` into it; returns the `up`."""
    before = faults.main_pid(HOST, UNIT)
    project.set_config(STACK, "inferenceHosts.local.server.ctxSize", ctx_size)
    update = project.start_up(STACK)
    faults.wait_for_restart(HOST, UNIT, before)
    fault(update)
    return update


def cut_ssh_until_done(update: subprocess.Popen) -> None:
    # Every session of the restart's window is cut: the unit's health wait, and whatever the
    # update starts next, as a network that stays down a while would.
    deadline = time.monotonic() + 20
    while update.poll() is None and time.monotonic() < deadline:
        faults.cut_ssh(HOST)
        time.sleep(0.3)


def converges(project: Project, ctx_size: int, host) -> None:
    """The next `up --refresh` finishes the change: the server serves it, nothing is left in
    flight, and no secret is on disk in plain text."""
    converged = project.up(STACK, "--refresh")
    assert converged.ok, converged.output[-4000:]
    assert project.pending_operations(STACK) == []
    assert f"--ctx-size\n{ctx_size}" in "\n".join(host_outputs(project)["command_line"])
    assert host_outputs(project)["smoke_test"] == SMOKE
    assert review(project)[0] == "no changes"
    key_line = host.private_key_path.read_text().splitlines()[1]
    assert not [f for f in project.state.rglob("*") if f.is_file() and key_line in f.read_text(errors="replace")]
    with Session(host.connection()) as ssh:
        assert ssh.run("find /opt/spear -name '*.spear-tmp'").stdout == ""  # no half-written file


def test_an_ssh_connection_cut_while_the_server_restarts_fails_plainly_and_the_next_up_converges(
        project, host):
    update = restart_with_fault(project, 448, cut_ssh_until_done)
    output, _ = update.communicate(timeout=900)
    assert update.returncode != 0, output[-4000:]
    assert "was lost while" in output and "`pulumi up --refresh`" in output, output[-4000:]
    assert "paramiko" not in output, output[-4000:]  # the reason, not paramiko's frames
    converges(project, 448, host)


def test_an_up_killed_mid_update_leaves_its_lock_which_pulumi_cancel_clears(project, host):
    restart_with_fault(project, 320, faults.kill_engine)
    in_flight = project.pending_operations(STACK)
    assert project.urn(STACK, "local-unit") in [op["resource"]["urn"] for op in in_flight], in_flight
    # Nothing tells the backend that the update died: its lock stays, naming it, until cleared.
    locked = project.pulumi("up", "--stack", STACK, "--yes", "--refresh", check=False)
    assert locked.returncode != 0, locked.stdout[-3000:]
    assert "the stack is currently locked by 1 lock(s)" in locked.stdout + locked.stderr
    project.pulumi("cancel", "--stack", STACK, "--yes")
    converges(project, 320, host)


def test_a_host_presenting_another_key_is_refused_before_anything_is_sent(project, host):
    # The same host with a new identity: as if re-created, or someone else on its address.
    recorded = host_outputs(project)["ssh_host_key"]
    assert recorded["trusted"] == "first use"
    renew_host_key(HOST)
    local_stack.stop(HOST)
    local_stack.start(HOST, SSH_PORT, fresh=False)  # its disk as it was: only the key is new
    presented = Session(host.connection()).host_key
    refused = project.up(STACK, "--refresh")  # the refresh is the first to connect
    assert not refused.ok
    assert (f"expected {recorded['fingerprint']}, presented {fingerprint(presented)};"
            " nothing was sent") in refused.output, refused.output[-3000:]
    # Trusting the new key is a reviewed step: the record made again, and every other part of
    # the host only records the new way in (nothing is sent); refresh and destroy then use it.
    record = project.urn(STACK, "local-host-key")
    reviewed = {p.resource: p.change for p in parts(project.preview(STACK, "--replace", record))}
    assert reviewed.pop("local-host-key") == "replace"
    # The checks keyed on the server's start time cannot know it before the unit's update (which
    # only records the new way in), so the preview lists them as run again.
    assert {reviewed.pop(check) for check in ("local-verification", "local-smoke-test")} == {
        "in place (no restart)"}
    assert set(reviewed.values()) == {"new way in"}, reviewed
    serving = faults.main_pid(HOST, UNIT)
    trusted = project.up(STACK, "--replace", record)
    assert trusted.ok, trusted.output[-4000:]
    assert faults.main_pid(HOST, UNIT) == serving  # nothing restarted: nothing was sent
    assert host_outputs(project)["ssh_host_key"]["fingerprint"] == fingerprint(presented)
    assert host_outputs(project)["smoke_test"] == SMOKE
    assert project.refresh(STACK).ok
    assert review(project)[0] == "no changes"


def test_destroy_leaves_no_unit_behind(project, host):
    update = project.destroy(STACK)
    assert update.ok, update.output
    ssh = Session(host.connection())  # the host was restarted since the module's session
    assert ssh.run(f"test -e /etc/systemd/system/{UNIT}", check=False).code != 0
    listed = ssh.run(f"systemctl list-unit-files {UNIT} --no-legend", check=False)
    assert listed.code != 0 and listed.stdout.strip() == ""  # exits 1: no such unit file
    assert ssh.run("pgrep -x llama-server", check=False).code != 0
    assert ssh.run("test -e /opt/spear/config/server.conf", check=False).code != 0
