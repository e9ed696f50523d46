"""The serving image for real: its one layer unpacked and run with chroot (which proves the layer
holds everything vllm serve needs: python, its libraries, llama-server, the models), each server
under a hostname of its own as a pod has, on this machine's loopback. What the fleet depends on,
as vLLM v0.24.0 does it: the key, the model list, completions streamed and not, tool calls, the
endpoint verification's probes, priorities and cache salts, and the metrics the alerts watch."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spear.probes import TOOL_CALL, probes
from spear.smoke import judge, request_body
from localhosts.images.serving_image import build
from spear.tool_calls import PARSER_NOT_CONFIGURED

pytestmark = pytest.mark.integration

KEY = "sk-serving-image-test"
SERVED = "qwen3-coder-next"
REVISION = "da6e2ed27304dd39abadd9c82ef50e8de67bdd4c"
# Each server on PORT, its llama-server on PORT + 1.
PORTS = {"priority": 18410, "fcfs": 18412, "parser-trap": 18414}
READY_WITHIN = 90.0


def extract_layer(image: build.Image, into: Path) -> None:
    """The image's one layer unpacked into `into`, as containerd's snapshotter would."""
    with tarfile.open(image.archive) as outer:
        def blob(digest: str):
            return outer.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}")

        manifest = json.load(blob(image.digest))
        with blob(manifest["layers"][0]["digest"]) as layer, \
                tarfile.open(fileobj=layer, mode="r|gz") as tar:
            tar.extractall(into, filter="fully_trusted")  # our own archive: keep /tmp's 1777


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("serving-image") / "rootfs"
    root.mkdir()
    extract_layer(build.ensure_image(), root)
    # The servers share this machine's network, so they listen on loopback, as the RunPod pods do.
    config_file = root / build.CONFIG_PATH.lstrip("/")
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "host": "127.0.0.1"}))
    return root


def serve_argv(model: str, port: int, *extra: str) -> list[str]:
    return ["vllm", "serve", model, "--revision", REVISION, "--served-model-name", SERVED,
            "--tensor-parallel-size", "1", "--max-model-len", "262144",
            "--gpu-memory-utilization", "0.90", "--enable-auto-tool-choice",
            "--tool-call-parser", "qwen3_coder", *extra, "--port", str(port)]


def in_pod(root: Path, pod: str, argv: list[str], **kwargs) -> subprocess.Popen:
    """argv in the chroot with a clean environment and hostname `pod`, and /proc, as a container
    has (llama-server finds its libraries through $ORIGIN, which the loader reads from /proc).
    The mounts are the process's own and go with it."""
    (root / "proc").mkdir(exist_ok=True)
    script = ('mount -t proc proc "$1/proc" && hostname "$0" &&'
              f' exec env -i {build.PATH_ENV} VLLM_API_KEY={KEY} /usr/sbin/chroot "$@"')
    return subprocess.Popen(["unshare", "--uts", "--mount", "sh", "-c", script, pod, str(root),
                             *argv], **kwargs)


def call(port: int, method: str, path: str, body: dict | None = None, key: str | None = KEY,
         ) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        connection.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def servers(rootfs, tmp_path_factory) -> Iterator[dict[str, int]]:
    """Three servers of the image: the stable model with and without priority scheduling, and
    the parser trap; {name: port} once each says /health 200."""
    logs = tmp_path_factory.mktemp("serving-image-logs")
    models = {"priority": build.STABLE_MODEL, "fcfs": build.STABLE_MODEL,
              "parser-trap": build.NO_TOOL_TEMPLATE_MODEL}
    procs = {}
    for name, port in PORTS.items():
        extra = ("--scheduling-policy", "priority") if name == "priority" else ()
        with open(logs / f"{name}.log", "wb") as log:
            procs[name] = in_pod(rootfs, f"vllm-standin-{name}", serve_argv(models[name], port,
                                                                              *extra),
                                 stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_WITHIN
        for name, port in PORTS.items():
            while True:
                if procs[name].poll() is not None:
                    pytest.fail(f"{name} exited with {procs[name].returncode}:\n"
                                f"{(logs / f'{name}.log').read_text()}")
                try:
                    if call(port, "GET", "/health", key=None)[0] == 200:
                        break
                except OSError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    pytest.fail(f"{name} not healthy:\n{(logs / f'{name}.log').read_text()}")
                time.sleep(0.3)
        yield PORTS
    finally:
        for proc in procs.values():
            proc.terminate()
        for name, proc in procs.items():
            assert proc.wait(timeout=30) == 0, (logs / f"{name}.log").read_text()
        # Stopping the stand-in stops its llama-server: nothing listens on either port.
        for port in PORTS.values():
            for each in (port, port + 1):
                with socket.socket() as s:
                    assert s.connect_ex(("127.0.0.1", each)) != 0, f"port {each} still open"


def chat(port: int, **fields) -> tuple[int, dict[str, str], dict]:
    status, headers, body = call(port, "POST", "/v1/chat/completions",
                                 {**json.loads(request_body(SERVED)), **fields})
    return status, headers, json.loads(body)


def metrics(port: int) -> dict[str, float]:
    status, _, body = call(port, "GET", "/metrics", key=None)
    assert status == 200
    return {m[1]: float(m[2]) for m in re.finditer(
        r'^(\S+?)\{(?:finished_reason="stop",)?model_name="' + SERVED + r'"\} (\S+)$',
        body.decode(), re.M)}


def test_an_unknown_model_is_refused_before_anything_starts(rootfs):
    proc = in_pod(rootfs, "vllm-standin-x", serve_argv("meta-llama/Llama-3-8B", 18420),
                  stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert (b"this stand-in serves Qwen/Qwen3-Coder-Next-FP8, spear-fleet/tiny-no-tool-template"
            in err)


def test_the_layer_is_a_root_filesystem_of_its_own(rootfs):
    assert (rootfs / "tmp").stat().st_mode & 0o7777 == 0o1777
    assert os.access(rootfs / "usr/local/bin/vllm", os.X_OK)
    assert (rootfs / "usr/local/bin/vllm").read_bytes().startswith(b"#!/usr/bin/python3\n")
    assert not (rootfs / "usr/lib/python3/dist-packages").exists()
    assert not (rootfs / "usr/lib/python3.11/test").exists()
    assert "spear:x:1000:1000" in (rootfs / "etc/passwd").read_text()


def test_health_and_metrics_need_no_key_and_the_v1_paths_do(servers):
    port = servers["priority"]
    assert call(port, "GET", "/health", key=None)[0] == 200
    assert call(port, "GET", "/metrics", key=None)[0] == 200
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"),
                         ("GET", "/standin/requests")):
        status, _, body = call(port, method, path, {} if method == "POST" else None, key=None)
        assert (status, json.loads(body)) == (401, {"error": "Unauthorized"})
        assert call(port, method, path, {} if method == "POST" else None, key="sk-wrong")[0] == 401


def test_the_model_list_names_the_served_model_with_its_repo_and_length(servers):
    status, headers, body = call(servers["priority"], "GET", "/v1/models")
    assert status == 200
    (model,) = json.loads(body)["data"]
    assert (model["id"], model["root"], model["max_model_len"]) == (SERVED, build.STABLE_MODEL,
                                                                    262144)
    assert headers["x-spear-standin-pod"] == "vllm-standin-priority"


def test_a_chat_completion_passes_the_smoke_test(servers):
    status, headers, answer = chat(servers["fcfs"])
    assert status == 200
    assert str(judge(answer)) == "end_turn | SPEAR-BACKEND-OK | ()"
    assert headers["x-spear-standin-pod"] == "vllm-standin-fcfs"


def test_a_streamed_chat_comes_in_chunks_that_add_up_to_the_answer(servers):
    connection = http.client.HTTPConnection("127.0.0.1", servers["fcfs"], timeout=60)
    body = {**json.loads(request_body(SERVED)), "stream": True}
    connection.request("POST", "/v1/chat/completions", json.dumps(body),
                       {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type").startswith("text/event-stream")
    assert response.getheader("Transfer-Encoding") == "chunked"
    events = [line for line in response.read().decode().splitlines() if line.startswith("data: ")]
    connection.close()
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "SPEAR-BACKEND-OK"
    assert len(chunks) > 2


def test_the_endpoint_verification_passes_on_the_stable_model(servers):
    for probe in probes(SERVED):
        status, _, body = call(servers["priority"], probe.method, probe.path, probe.body)
        result = probe.judge(status, body)
        assert result.passed, result


def test_the_no_tool_template_model_fails_the_tool_call_gate_as_parser_not_configured(servers):
    (tool_probe,) = [p for p in probes(SERVED) if p.name == TOOL_CALL]
    status, _, body = call(servers["parser-trap"], "POST", tool_probe.path, tool_probe.body)
    result = tool_probe.judge(status, body)
    assert (result.passed, result.reason) == (False, PARSER_NOT_CONFIGURED), result


def test_priority_10_is_refused_without_priority_scheduling_and_taken_with_it(servers):
    status, _, answer = chat(servers["fcfs"], priority=10)
    assert status == 400
    assert answer["error"]["message"] == "Got priority 10 but Priority scheduling is not enabled."
    status, _, answer = chat(servers["priority"], priority=10)
    assert status == 200 and str(judge(answer)) == "end_turn | SPEAR-BACKEND-OK | ()"


def test_the_cache_salt_is_taken_and_recorded_with_the_pod_that_served_it(servers):
    port = servers["priority"]
    assert chat(port, cache_salt="team-ana", priority=0)[0] == 200
    assert chat(port, cache_salt="")[0] == 400
    status, _, body = call(port, "GET", "/standin/requests")
    assert status == 200
    *_, served, refused = json.loads(body)
    assert served == {"pod": "vllm-standin-priority", "model": SERVED, "cache_salt": "team-ana",
                      "priority": 0, "stream": False, "status": 200}
    assert (refused["cache_salt"], refused["status"]) == ("", 400)


def test_the_metrics_count_what_was_served(servers):
    port = servers["priority"]
    before = metrics(port)
    assert chat(port)[0] == 200
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", "/v1/chat/completions",
                       json.dumps({**json.loads(request_body(SERVED)), "stream": True}),
                       {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    connection.getresponse().read()
    connection.close()
    after = metrics(port)
    assert after["vllm:request_success_total"] == before["vllm:request_success_total"] + 2
    assert after["vllm:time_to_first_token_seconds_count"] == \
        before["vllm:time_to_first_token_seconds_count"] + 2
    assert after["vllm:e2e_request_latency_seconds_count"] == \
        before["vllm:e2e_request_latency_seconds_count"] + 2
    assert after["vllm:inter_token_latency_seconds_count"] > \
        before["vllm:inter_token_latency_seconds_count"]
    for counter in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                    "vllm:prefix_cache_queries_total"):
        assert after[counter] > before[counter], counter
    # The same prompt twice: llama-server reuses its slot's cache, a prefix-cache hit.
    assert after["vllm:prefix_cache_hits_total"] > before["vllm:prefix_cache_hits_total"]
    assert after["vllm:num_preemptions_total"] == 0
    assert after["vllm:num_requests_running"] == after["vllm:num_requests_waiting"] == 0


def prove(routes: list[dict], tmp_path: Path) -> subprocess.CompletedProcess:
    """hosts/gateway/spear_gateway/prove.py as a gateway pod's init container runs it: the hook
    package and spear/ on its path, the fleet's key in its environment."""
    path = tmp_path / "proofs.json"
    path.write_text(json.dumps(routes))
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run(["python3", "-m", "spear_gateway.prove", str(path)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={
                              "PATH": os.environ["PATH"], "FLEET_KEY": KEY,
                              "PYTHONPATH": f"{repo / 'hosts' / 'gateway'}:{repo}"})


def route(name: str, port: int) -> dict:
    return {"route": name, "api_base": f"http://127.0.0.1:{port}/v1", "served_model": SERVED,
            "key_env": "FLEET_KEY"}


def test_a_gateway_pod_proves_a_sound_route_and_refuses_to_start_on_the_parser_trap(servers,
                                                                                    tmp_path):
    sound = prove([route("vllm-stable", servers["fcfs"])], tmp_path)
    assert (sound.returncode, sound.stdout) == (0, "spear-prove: vllm-stable: model-list,"
                                                   " completion, tool-call, smoke test passed\n")
    trapped = prove([route("vllm-stable", servers["fcfs"]),
                     route("vllm-canary", servers["parser-trap"])], tmp_path)
    assert trapped.returncode == 1
    assert trapped.stderr.startswith(
        f"spear-prove: endpoint vllm-canary: tool-call probe failed: {PARSER_NOT_CONFIGURED} (")
