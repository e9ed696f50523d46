"""Tiny fixed-answer GGUF models (scripts/tiny_model.py).

The unit tests check the generated GGUF with gguf's reader and replay the model's forward pass in
numpy. The integration tests serve the models with the local stack's real llama-server, built
on this machine when no local host has built it yet (tests/llama_build.py).
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

from scripts import llama_source, tiny_model
from tests.llama_build import local_stack_llama_server
from tests.stack_files import stack_raw

ANSWERS = [tiny_model.SMOKE_ANSWER, tiny_model.TOOL_CALL_ANSWER]
SYSTEM_PROMPT = "Reply with exactly the token requested, nothing else."
GET_TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Return the current time.",
        "parameters": {"type": "object", "properties": {}},
    },
}


def test_the_local_stack_names_the_smoke_model_exactly():
    shard = stack_raw("local")["model"]["shards"][0]
    path = tiny_model.ensure_model(tiny_model.SMOKE_ANSWER)
    assert Path(shard["source"]).expanduser() == path
    assert shard["size"] == path.stat().st_size
    assert shard["sha256"] == llama_source.file_sha256(path)


@pytest.fixture(scope="module", params=ANSWERS, ids=["smoke", "tool-call"])
def generated(request, tmp_path_factory) -> tuple[str, GGUFReader]:
    path = tmp_path_factory.mktemp("model") / "model.gguf"
    tiny_model.make_fixed_answer_model(request.param, path)
    return request.param, GGUFReader(path)


def _field(reader: GGUFReader, key: str):
    return reader.fields[key].contents()


def _tensor(reader: GGUFReader, name: str) -> np.ndarray:
    (tensor,) = [t for t in reader.tensors if t.name == name]
    return np.asarray(tensor.data, dtype=np.float32)


def test_metadata(generated):
    answer, reader = generated
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "spear.fixed_answer") == answer
    assert _field(reader, "llama.block_count") == 2
    assert _field(reader, "llama.embedding_length") == 64
    n_head = _field(reader, "llama.attention.head_count")
    assert (64 // n_head) % 32 == 0, "q8_0 KV cache needs head sizes that are multiples of 32"
    assert _field(reader, "tokenizer.ggml.pre") == "qwen2"
    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert len(tokens) == 151936
    assert tokens[_field(reader, "tokenizer.ggml.eos_token_id")] == "<|im_end|>"
    template = _field(reader, "tokenizer.chat_template")
    assert "<tool_call>" in template and "<|im_start|>assistant\\n" in template


def test_tensors(generated):
    _, reader = generated
    embd = _tensor(reader, "token_embd.weight")
    assert embd.shape == (151936, 64)
    assert _tensor(reader, "output.weight").shape == (151936, 64)
    for layer in range(2):
        for name in ("attn_output", "ffn_down"):
            assert not _tensor(reader, f"blk.{layer}.{name}.weight").any()


def test_forward_pass_says_the_answer(generated):
    """With the blocks adding nothing, logits = output @ rms_norm(embedding of current token)."""
    answer, reader = generated
    tokens = _field(reader, "tokenizer.ggml.tokens")
    text_tokens = tiny_model.token_bytes(tokens, _field(reader, "tokenizer.ggml.token_type"))
    by_id = {tid: piece for piece, tid in text_tokens.items()}
    end = _field(reader, "tokenizer.ggml.eos_token_id")
    embd = _tensor(reader, "token_embd.weight")
    output = _tensor(reader, "output.weight")

    def next_token(current: int) -> int:
        h = embd[current]
        logits = output @ (h / np.sqrt(np.mean(h * h) + tiny_model.RMS_EPS))
        best = int(np.argmax(logits))
        assert logits[best] - np.partition(logits, -2)[-2] > 50, "answer must win by far"
        return best

    said = []
    current = text_tokens[tiny_model.TRIGGER_TEXT.encode()]
    while (current := next_token(current)) != end:
        said.append(by_id[current])
        assert len(said) <= tiny_model.MAX_ANSWER_TOKENS
    assert b"".join(said).decode() == answer
    # Any token off the answer's chain ends the turn.
    assert next_token(text_tokens[b" Paris"]) == end


def test_split_refuses_repeats(generated):
    _, reader = generated
    text_tokens = tiny_model.token_bytes(
        _field(reader, "tokenizer.ggml.tokens"), _field(reader, "tokenizer.ggml.token_type")
    )
    newline = text_tokens[b"\n"]
    with pytest.raises(ValueError):
        tiny_model.split_distinct(b"\n", text_tokens, {newline})
    split = tiny_model.split_distinct(b"ab ab ab", text_tokens, set())
    assert len(set(split)) == len(split)


# --- integration: a real llama-server ---------------------------------------------------------


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


@pytest.mark.integration
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
