"""The pure parts of the host resources: what decides a rebuild, a model re-fetch or a restart,
the placement and command-line checks, the smoke test's verdict, and the build's lock, with a
shell on this machine standing in for the host."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from components.gateway.database import LocalDatabaseProvider
from components.inference_host import llama_server_build
from components.inference_host.llama_server_build import (BUILD_SCRIPT, LlamaServerBuildProvider,
                                                          build_key)
from components.inference_host.model_files import ModelFilesProvider, manifest_digest
from components.hostops.remote_file import RemoteFileProvider
from spear.smoke import SmokeResult, judge
from components.hostops.ssh import RemoteError, Result
from components.hostops.systemd_unit import (SystemdUnitProvider, command_line_mismatch,
                                             observed_command_line, placement_ok)

GIT = {"git": "https://github.com/ggml-org/llama.cpp", "commit": "a" * 40}
FLAGS = ["-DGGML_CUDA=ON"]


def test_build_key_follows_the_pin_and_flags_only():
    key = build_key(GIT, FLAGS)
    assert build_key({**GIT, "git": "https://mirror.internal/llama.cpp"}, FLAGS) == key
    assert build_key({**GIT, "commit": "b" * 40}, FLAGS) != key
    assert build_key(GIT, FLAGS + ["-DGGML_NATIVE=OFF"]) != key
    archive = {"archive": "/a.tar.gz", "sha256": "c" * 64, "subdir": "x"}
    assert build_key({**archive, "archive": "https://host/a.tar.gz"}, FLAGS) == build_key(archive, FLAGS)
    assert build_key({**archive, "subdir": "y"}, FLAGS) != build_key(archive, FLAGS)


def test_an_edit_of_the_build_script_is_a_new_build_key():
    script = BUILD_SCRIPT.read_text()
    assert build_key(GIT, FLAGS, script) == build_key(GIT, FLAGS)  # the repository's script by default
    assert build_key(GIT, FLAGS, script + "# one more line\n") != build_key(GIT, FLAGS)


def test_manifest_digest_ignores_where_shards_come_from():
    shards = [{"name": "m.gguf", "size": 10, "sha256": "d" * 64, "source": "/a/m.gguf"}]
    moved = [{**shards[0], "source": "https://host/m.gguf"}]
    renamed = [{**shards[0], "name": "n.gguf"}]
    assert manifest_digest(moved) == manifest_digest(shards)
    assert manifest_digest(renamed) != manifest_digest(shards)


def build_props(**changes):
    props = {"connection": {"host": "h"}, "runtime_dir": "/opt/spear", "source": GIT,
             "cmake_flags": FLAGS, "build_key": build_key(GIT, FLAGS),
             "build_script": BUILD_SCRIPT.read_text()}
    return {**props, **changes}


def test_a_new_pin_or_build_script_replaces_the_build_and_nothing_else_does():
    provider = LlamaServerBuildProvider()
    olds = build_props()
    new_pin = build_props(source={**GIT, "commit": "b" * 40},
                          build_key=build_key({**GIT, "commit": "b" * 40}, FLAGS))
    assert provider.diff("id", olds, new_pin).replaces == ["build_key"]
    edited = BUILD_SCRIPT.read_text() + "# one more line\n"
    new_script = build_props(build_script=edited, build_key=build_key(GIT, FLAGS, edited))
    assert provider.diff("id", olds, new_script).replaces == ["build_key"]


def test_a_new_way_in_is_recorded_without_touching_the_host():
    # A re-keyed host or a rotated login: the update records it, so that refresh and destroy
    # use it; nothing is applied (apply would rebuild, and fails loudly here if called).
    provider = LlamaServerBuildProvider()
    provider.apply = None
    olds = {**build_props(), "binary": "/opt/spear/llama.cpp/current/llama-server"}
    news = build_props(connection={"host": "h", "private_key": "rotated", "host_key": "k2"},
                       reach="@h: host key ssh-ed25519 SHA256:new")
    diff = provider.diff("id", olds, news)
    assert diff.changes and not diff.replaces
    outs = provider.update("id", olds, news).outs
    assert outs == {**olds, "connection": news["connection"], "reach": news["reach"]}


def test_a_manifest_change_updates_the_model_in_place():
    provider = ModelFilesProvider()
    olds = {"runtime_dir": "/opt/spear", "digest": "1"}
    diff = provider.diff("id", olds, {**olds, "digest": "2"})
    assert diff.changes and not diff.replaces
    assert provider.diff("id", olds, dict(olds)).changes is False


def test_file_content_updates_and_a_new_path_replaces():
    provider = RemoteFileProvider()
    olds = {"path": "/a", "content": "x", "mode": 420}
    assert provider.diff("id", olds, {**olds, "content": "y"}).replaces == []
    assert provider.diff("id", olds, {**olds, "content": "y"}).changes
    assert provider.diff("id", olds, {**olds, "path": "/b"}).replaces == ["path"]


def test_a_restart_trigger_updates_the_unit():
    provider = SystemdUnitProvider()
    olds = {"unit": "u", "content": "c", "slice": "system.slice", "health": {},
            "restart_triggers": {"server_conf": "1"}}
    assert provider.diff("id", olds, {**olds, "restart_triggers": {"server_conf": "2"}}).changes
    assert not provider.diff("id", olds, dict(olds)).changes


EXPECTED_ARGV = ["llama-server", "--model", "/opt/spear/models/gguf/m.gguf", "--ctx-size", "512"]
# /proc/<pid>/cmdline names the binary by its real path.
RUNNING_BINARY = "/opt/spear/builds/0123456789abcdef/bin/llama-server"


def test_a_main_process_with_the_expected_arguments_is_no_drift_whatever_its_binary_path():
    running = [RUNNING_BINARY, *EXPECTED_ARGV[1:]]
    assert observed_command_line([EXPECTED_ARGV], running) == EXPECTED_ARGV
    assert command_line_mismatch("u", [EXPECTED_ARGV], running) is None


def test_a_main_process_with_other_arguments_is_recorded_as_drift_and_shown_beside_the_expected():
    running = [RUNNING_BINARY, "--model", "/opt/spear/models/gguf/m.gguf", "--ctx-size", "384"]
    assert observed_command_line([EXPECTED_ARGV], running) == ["llama-server", *running[1:]]
    assert command_line_mismatch("u", [EXPECTED_ARGV], running) == (
        f"u runs `{RUNNING_BINARY} --model /opt/spear/models/gguf/m.gguf --ctx-size 384`,"
        " not the expected `llama-server --model /opt/spear/models/gguf/m.gguf --ctx-size 512`")


def test_a_documented_fallback_of_the_launcher_is_no_drift():
    with_adapter = [*EXPECTED_ARGV, "--lora", "/opt/spear/models/lora/a.gguf"]
    running = [RUNNING_BINARY, *EXPECTED_ARGV[1:]]  # serve.sh dropped an unreadable adapter
    assert observed_command_line([with_adapter, EXPECTED_ARGV], running) == with_adapter
    assert command_line_mismatch("u", [with_adapter, EXPECTED_ARGV], running) is None
    assert command_line_mismatch("u", [with_adapter], running) is not None


def test_no_main_process_is_recorded_as_an_empty_command_line():
    assert observed_command_line([EXPECTED_ARGV], []) == []
    assert observed_command_line([["llama-server"]], []) == []
    assert "runs `(no main process)`" in command_line_mismatch("u", [EXPECTED_ARGV], [])


def test_a_running_command_line_that_refresh_found_different_updates_the_unit():
    provider = SystemdUnitProvider()
    news = {"unit": "u", "content": "c", "slice": "system.slice", "health": {},
            "restart_triggers": {}, "command_line": EXPECTED_ARGV}
    refreshed = {**news, "command_line": observed_command_line(
        [EXPECTED_ARGV], [RUNNING_BINARY, *EXPECTED_ARGV[1:-1], "384"])}
    diff = provider.diff("id", refreshed, news)
    assert diff.changes and not diff.replaces


class FakeUnitHost:
    """A host whose unit file exists and whose unit's main process runs `argv`."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def read(self, path: str) -> str:
        return "[Service]\n"

    def run(self, command: str, check: bool = True, timeout: float | None = None) -> Result:
        if "MainPID" in command:
            return Result(0, "42\n" if self.argv else "0\n", "")
        if command == "cat /proc/42/cmdline":
            return Result(0, "".join(f"{a}\0" for a in self.argv), "")
        return Result(0, "active\n", "")


def test_refresh_records_the_command_line_the_main_process_runs(monkeypatch):
    props = {"connection": {}, "unit": "u", "content": "[Service]\n", "command_line": EXPECTED_ARGV}
    drifted = [RUNNING_BINARY, *EXPECTED_ARGV[1:-1], "384"]
    for argv, recorded in [([RUNNING_BINARY, *EXPECTED_ARGV[1:]], EXPECTED_ARGV),
                           (drifted, ["llama-server", *drifted[1:]]), ([], [])]:
        monkeypatch.setattr("components.hostops.systemd_unit.Session", lambda _c, a=argv: FakeUnitHost(a))
        assert SystemdUnitProvider().read("id", props).outs["command_line"] == recorded


class HealthHost:
    """A host whose unit is in `state` with main PID 42, whose port `listening` serves, and
    whose health endpoint gives `answers` in turn (the last one from then on)."""

    def __init__(self, answers: list, listening: str = "42",
                 state: str = "ActiveState=active NRestarts=0 MainPID=42") -> None:
        self.answers, self.listening, self.state, self.asked = answers, listening, state, 0

    def run(self, command: str, check: bool = True, timeout: float | None = None) -> Result:
        if command.startswith("systemctl show"):
            return Result(0, self.state.replace(" ", "\n"), "")
        if command.startswith("ss "):
            return Result(0, f'LISTEN 0 4096 127.0.0.1:8080 users:(("x",pid={self.listening},fd=3))', "")
        return Result(0, "bind: Address already in use\n", "")  # the journal

    def http(self, port: int, method: str, path: str, **_: object) -> tuple[int, bytes]:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if isinstance(answer, Exception):
            raise answer
        return answer


HEALTH = {"address": "127.0.0.1", "port": 8080, "path": "/health", "timeout_seconds": 5}


def test_the_health_wait_ends_at_the_first_200_from_the_units_own_process():
    host = HealthHost([ConnectionError("nothing answers"), (200, b"ok")])
    SystemdUnitProvider._wait_healthy(host, "u", HEALTH)
    assert host.asked == 2


def test_a_port_another_process_serves_is_not_healthy_and_the_timeout_says_so():
    host = HealthHost([(200, b"ok")], listening="77")
    with pytest.raises(RemoteError, match=r"u not healthy after 0.5 s \(127.0.0.1:8080/health: port"
                                          r" 8080 is served by another process, not u \(main PID"
                                          r" 42; listening: \['77'\]\)\)"):
        SystemdUnitProvider._wait_healthy(host, "u", {**HEALTH, "timeout_seconds": 0.5})


def test_a_unit_that_restarts_fails_the_health_wait_at_once_with_its_journal():
    host = HealthHost([(503, b"loading")], state="ActiveState=activating NRestarts=1 MainPID=0")
    with pytest.raises(RemoteError, match="u did not stay up .*its journal:\nbind: Address already"):
        SystemdUnitProvider._wait_healthy(host, "u", HEALTH)
    assert host.asked == 0


class ShellHost:
    """This machine standing in for a host: commands run in a local shell, files are copied."""

    where = "this machine"

    def __init__(self, _connection) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def run(self, command: str, check: bool = True, timeout: float | None = None) -> Result:
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RemoteError(f"`{command}` exited {done.returncode}: {done.stdout}{done.stderr}")
        return Result(done.returncode, done.stdout, done.stderr)

    def upload(self, local_path: str, remote_path: str) -> None:
        Path(remote_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(local_path, remote_path)


# Stands in for build-llama-server.sh: slow enough for the other host to arrive mid-build, and
# it logs each build it makes.
STUB_BUILD = """#!/usr/bin/env bash
set -eu
test -f "$1/src/$2/CMakeLists.txt"
echo "built $1" >> {log}
sleep 1
mkdir -p "$1/bin" && echo "version: stub" > "$1/version.txt" && touch "$1/.complete"
"""


def llama_tree(tmp_path: Path, kind: str) -> dict[str, str]:
    """A source pin of kind "archive" or "git" for a tree that holds a CMakeLists.txt."""
    tree = tmp_path / "llama"
    tree.mkdir()
    (tree / "CMakeLists.txt").write_text("project(stub)\n")
    if kind == "archive":
        archive = tmp_path / "llama.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(tree, arcname="llama")
        return {"archive": str(archive), "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
                "subdir": "llama"}
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "stub"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    return {"git": str(tree), "commit": commit.stdout.strip()}


@pytest.mark.parametrize("kind", ["archive", "git"])
def test_two_hosts_sharing_the_builds_folder_build_a_key_once(tmp_path, monkeypatch, kind):
    # Like the local hosts, which bind-mount one folder as <runtime>/builds.
    shared = tmp_path / "shared-builds"
    shared.mkdir()
    log = tmp_path / "builds.log"
    source = llama_tree(tmp_path, kind)
    script = STUB_BUILD.format(log=log)
    key = build_key(source, [], script)

    def host_props(name: str) -> dict:
        runtime = tmp_path / name
        runtime.mkdir()
        (runtime / "builds").symlink_to(shared)
        return {"connection": {}, "runtime_dir": str(runtime), "source": source, "cmake_flags": [],
                "build_key": key, "build_script": script, "timeout_seconds": 60}

    monkeypatch.setattr(llama_server_build, "Session", ShellHost)
    hosts = [host_props("alpha"), host_props("beta")]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda props: LlamaServerBuildProvider().apply(props, None), hosts))
    assert len(log.read_text().splitlines()) == 1
    assert sorted(r["reused"] for r in results) == [False, True]  # the second waited, then reused
    assert (shared / f"{key}.lock").exists()
    assert all(r["version"] == "version: stub" for r in results)


@pytest.mark.parametrize("cgroup,ok", [
    ("0::/system.slice/spear-inference.service\n", True),
    # A hybrid host: v1 controller lines too; only the unified line counts.
    ("12:cpu,cpuacct:/system.slice/spear-inference.service\n1:name=systemd:/system.slice/x\n"
     "0::/system.slice/spear-inference.service\n", True),
    ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/spear-inference.service\n", False),
    ("0::/system.slice/spear-inference.service/extra\n", False),
    ("12:cpu:/system.slice/spear-inference.service\n", False),
])
def test_placement_needs_the_unified_line_in_system_slice(cgroup, ok):
    assert placement_ok(cgroup, "system.slice", "spear-inference.service") is ok


def completion(finish, content, calls=()):
    message = {"content": content}
    if calls:
        message["tool_calls"] = [{"function": {"name": name}} for name in calls]
    return {"choices": [{"finish_reason": finish, "message": message}]}


def test_the_smoke_test_passes_only_on_its_three_parts():
    ok = judge(completion("stop", "SPEAR-BACKEND-OK\n"))
    assert ok.passed and str(ok) == "end_turn | SPEAR-BACKEND-OK | ()"
    assert not judge(completion("stop", "SPEAR-BACKEND-OK.")).passed
    assert not judge(completion("length", "SPEAR-BACKEND-OK")).passed
    called = judge(completion("stop", "SPEAR-BACKEND-OK", ["get_time"]))
    assert not called.passed and str(called) == "end_turn | SPEAR-BACKEND-OK | (get_time,)"
    tool_use = judge(completion("tool_calls", "", ["get_time"]))
    assert tool_use == SmokeResult("tool_use", "", ("get_time",))
    assert judge({"choices": []}).stop_reason == "error"


def test_an_output_named_like_a_way_in_is_not_taken_for_one():
    # The database's `cluster` output (its PostgreSQL cluster) is no cluster credential.
    inputs = {"connection": {"host": "h"}, "runtime_dir": "/opt/spear-gateway", "port": 5432}
    outputs = {**inputs, "cluster": "15/spear", "system_id": "7714393121134739559"}
    assert LocalDatabaseProvider().diff("id", outputs, inputs).changes is False
