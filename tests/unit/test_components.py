"""The pure parts of the host resources: what decides a rebuild, a model re-fetch or a restart,
the placement check, the smoke test's verdict, and the HTTP reading of the SSH channel."""

from __future__ import annotations

import pytest

from components.inference_host.llama_server_build import LlamaServerBuildProvider, build_key
from components.inference_host.model_files import ModelFilesProvider, manifest_digest
from components.hostops.remote_file import RemoteFileProvider
from components.hostops.smoke_test import SmokeResult, judge
from components.hostops.ssh import _parse_http
from components.hostops.systemd_unit import SystemdUnitProvider, placement_ok

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


def test_manifest_digest_ignores_where_shards_come_from():
    shards = [{"name": "m.gguf", "size": 10, "sha256": "d" * 64, "source": "/a/m.gguf"}]
    moved = [{**shards[0], "source": "https://host/m.gguf"}]
    renamed = [{**shards[0], "name": "n.gguf"}]
    assert manifest_digest(moved) == manifest_digest(shards)
    assert manifest_digest(renamed) != manifest_digest(shards)


def build_props(**changes):
    props = {"connection": {"host": "h"}, "runtime_dir": "/opt/spear", "source": GIT,
             "cmake_flags": FLAGS, "build_key": build_key(GIT, FLAGS)}
    return {**props, **changes}


def test_a_new_pin_replaces_the_build_and_nothing_else_does():
    provider = LlamaServerBuildProvider()
    olds = build_props()
    new_pin = build_props(source={**GIT, "commit": "b" * 40},
                          build_key=build_key({**GIT, "commit": "b" * 40}, FLAGS))
    assert provider.diff("id", olds, new_pin).replaces == ["build_key"]
    new_key = build_props(connection={"host": "h", "private_key": "rotated"})
    assert provider.diff("id", olds, new_key).changes is False


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


def test_http_answers_are_read_plain_and_chunked():
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    assert _parse_http(plain) == (200, b"ok")
    chunked = (b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"4\r\nload\r\n3\r\ning\r\n0\r\n\r\n")
    assert _parse_http(chunked) == (503, b"loading")
    with pytest.raises(ConnectionError):
        _parse_http(b"SSH-2.0-OpenSSH\r\n")
