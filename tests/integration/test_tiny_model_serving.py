"""The tiny fixed-answer models served by the local stack's real llama-server, built on this
machine when no local host has built it yet (tests/support/llama_build.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from localhosts import tiny_model
from tests.support.llama_build import local_stack_llama_server

SYSTEM_PROMPT = "Reply with exactly the token requested, nothing else."
GET_TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Return the current time.",
        "parameters": {"type": "object", "properties": {}},
    },
}
ANSWERS = [tiny_model.SMOKE_ANSWER, tiny_model.TOOL_CALL_ANSWER]


@pytest.fixture(scope="module")
def llama_server_bin() -> Path:
    return local_stack_llama_server()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, body: dict | None = None, timeout: float = 60) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


@pytest.fixture(scope="module", params=ANSWERS, ids=["smoke", "tool-call"])
def served(request, llama_server_bin, tmp_path_factory):
    """Yield (answer, base URL) of a llama-server serving that answer's model."""
    model = tiny_model.ensure_model(request.param)
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(llama_server_bin), "--jinja", "--ctx-size", "512",
             "--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--flash-attn", "on",
             "--host", "127.0.0.1", "--port", str(port), "-m", str(model)],
            stdout=log, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited with {proc.returncode}:\n{log_path.read_text()}")
            try:
                if _request(f"{base}/health", timeout=2).get("status") == "ok":
                    break
            except OSError:
                pass  # still loading: /health answers 503 or the port is not open yet
            if time.monotonic() > deadline:
                pytest.fail(f"llama-server not healthy after 60 s:\n{log_path.read_text()}")
            time.sleep(0.5)
        yield request.param, base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _chat(base: str, user: str, system: str | None = None, tools: list | None = None) -> dict:
    messages = [{"role": "system", "content": system}] if system else []
    body: dict = {"messages": [*messages, {"role": "user", "content": user}], "max_tokens": 64}
    if tools:
        body["tools"] = tools
    return _request(f"{base}/v1/chat/completions", body)["choices"][0]


USER_PROMPTS = [
    pytest.param(
        (SYSTEM_PROMPT, f"Reply with exactly: {tiny_model.SMOKE_ANSWER}"), id="asks-for-it"
    ),
    pytest.param((None, "What is the capital of France? Explain in detail."), id="other-prompt"),
]


@pytest.mark.parametrize("prompt", USER_PROMPTS)
def test_server_gives_fixed_answer(served, prompt):
    answer, base = served
    system, user = prompt
    if answer == tiny_model.SMOKE_ANSWER:
        choice = _chat(base, user, system)
        assert choice["finish_reason"] == "stop"
        assert choice["message"]["content"] == tiny_model.SMOKE_ANSWER
        assert not choice["message"].get("tool_calls")
    else:
        choice = _chat(base, user, system, tools=[GET_TIME_TOOL])
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["function"]["name"] == "get_time"
        assert json.loads(call["function"]["arguments"]) == {}
