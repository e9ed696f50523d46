"""Tiny scripted GGUF models (localhosts/standins/tiny_model.py): the generated GGUF checked with gguf's
reader, and the model's forward pass replayed in numpy from both prompt ends (tests/integration
serves them with a real llama-server, which also checks how the prompts are tokenised)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

from localhosts.hosts import llama_source

from localhosts.standins import tiny_model
from tests.support.stack_files import stack_raw

ANSWERS = [tiny_model.SMOKE_ANSWER, tiny_model.TOOL_CALL_ANSWER]
# The cookbook's spelling of the call, with a space after "path":.
COOKBOOK_CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n</tool_call>'


def test_the_local_stack_names_the_smoke_model_exactly():
    shard = stack_raw("local")["inferenceHosts"]["local"]["model"]["shards"][0]
    path = tiny_model.ensure_model(tiny_model.SMOKE_ANSWER)
    assert Path(shard["source"]).expanduser() == path
    assert shard["size"] == path.stat().st_size
    assert shard["sha256"] == llama_source.file_sha256(path)


@pytest.fixture(scope="module", params=ANSWERS, ids=["scripted", "parser-trap"])
def generated(request, tmp_path_factory) -> tuple[str, GGUFReader]:
    path = tmp_path_factory.mktemp("model") / "model.gguf"
    tiny_model.make_model(request.param, path)
    return request.param, GGUFReader(path)


def _field(reader: GGUFReader, key: str):
    return reader.fields[key].contents()


def _tensor(reader: GGUFReader, name: str) -> np.ndarray:
    (tensor,) = [t for t in reader.tensors if t.name == name]
    return np.asarray(tensor.data, dtype=np.float32)


def test_metadata(generated):
    answer, reader = generated
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "spear.answer") == answer
    assert _field(reader, "spear.tools_answer") == tiny_model.TOOL_CALL_ANSWER
    assert _field(reader, "llama.block_count") == 2
    assert _field(reader, "llama.embedding_length") == 64
    n_head = _field(reader, "llama.attention.head_count")
    assert (64 // n_head) % 32 == 0, "q8_0 KV cache needs head sizes that are multiples of 32"
    assert _field(reader, "tokenizer.ggml.pre") == "qwen2"
    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert len(tokens) == 151936
    assert tokens[_field(reader, "tokenizer.ggml.eos_token_id")] == "<|im_end|>"
    template = _field(reader, "tokenizer.chat_template")
    # <tool_call> keeps llama-server's template-driven tool-call parser; the generation prompt
    # gets one more newline when tools are offered, but not after a tool's result.
    assert "<tool_call>" in template
    assert ("{{- '<|im_start|>assistant\\n' }}\n    {%- if tools and messages[-1].role != 'tool' %}"
            "{{- '\\n' }}{%- endif %}" in template)


def test_tensors(generated):
    _, reader = generated
    embd = _tensor(reader, "token_embd.weight")
    assert embd.shape == (151936, 64)
    assert _tensor(reader, "output.weight").shape == (151936, 64)
    for layer in range(2):
        for name in ("attn_output", "ffn_down"):
            assert not _tensor(reader, f"blk.{layer}.{name}.weight").any()


@pytest.mark.parametrize("offers_tools", [False, True], ids=["plain-prompt", "tools-prompt"])
def test_forward_pass_says_the_scripted_answer(generated, offers_tools):
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
    trigger = tiny_model.TOOLS_TRIGGER_TEXT if offers_tools else tiny_model.TRIGGER_TEXT
    current = text_tokens[trigger.encode()]
    while (current := next_token(current)) != end:
        said.append(by_id[current])
        assert len(said) <= tiny_model.MAX_CHAIN_TOKENS
    assert b"".join(said).decode() == (tiny_model.TOOL_CALL_ANSWER if offers_tools else answer)
    # Any token off the chains ends the turn.
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


def test_the_cookbooks_spelling_of_the_call_cannot_be_said_by_such_a_model(generated):
    _, reader = generated
    text_tokens = tiny_model.token_bytes(
        _field(reader, "tokenizer.ggml.tokens"), _field(reader, "tokenizer.ggml.token_type")
    )
    triggers = {text_tokens[t.encode()] for t in (tiny_model.TRIGGER_TEXT, tiny_model.TOOLS_TRIGGER_TEXT)}
    with pytest.raises(ValueError, match="cannot split"):
        tiny_model.split_distinct(COOKBOOK_CALL.encode(), text_tokens, triggers)
    assert tiny_model.TOOL_CALL_ANSWER == COOKBOOK_CALL.replace('"path": ', '"path":')


def test_a_template_without_the_expected_generation_prompt_is_refused():
    with pytest.raises(ValueError, match="generation prompt"):
        tiny_model.scripted_template("{{ messages }}")
