"""The local stack's llama-server run on this machine for a test: on a free port, with a model,
until the test is done (localhosts/hosts/llama_build.py builds or reuses the binary)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from components.hostops.waiting import wait_until
from localhosts.hosts.llama_build import local_stack_llama_server
from localhosts.servers.processes import stop

# As the local stack runs it (a q8_0 KV cache needs flash attention on the CPU build), in a small
# window: these tests' prompts are short, and the stack's 32768 would need its YaRN flags too.
SERVER_FLAGS = ("--ctx-size", "512", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0",
                "--flash-attn", "on")
HEALTHY_WITHIN = 60.0


def request(url: str, body: dict | None = None, timeout: float = 60) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


@contextlib.contextmanager
def llama_server(model: Path, port: int, log_dir: Path, *flags: str,
                 launcher: Sequence[str] = ()) -> Iterator[str]:
    """Run the local stack's llama-server on `model` with `flags` added (started through
    `launcher`, e.g. tests/support/cpu_cap.py's); yield its base URL once /health says ok, and
    stop it afterwards."""
    log_path = log_dir / f"llama-server-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*launcher, str(local_stack_llama_server()), *SERVER_FLAGS, *flags,
             "--host", "127.0.0.1", "--port", str(port), "-m", str(model)],
            stdout=log, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"llama-server exited with {proc.returncode}:\n{log_path.read_text()}")
        with contextlib.suppress(OSError):  # still loading: 503, or the port is not open yet
            return request(f"{base}/health", timeout=2).get("status") == "ok"
        return False

    try:
        if not wait_until(healthy, HEALTHY_WITHIN, interval=0.5):
            pytest.fail(f"llama-server not healthy after {HEALTHY_WITHIN:.0f} s:\n{log_path.read_text()}")
        yield base
    finally:
        stop(proc, timeout=15)
