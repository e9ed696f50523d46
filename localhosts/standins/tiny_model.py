"""Tiny real GGUF models that give scripted answers, for tests and the local stack that serve them.

No package ships a small usable chat model, so we build one with gguf-py: a 2-layer llama of width
64 (2 heads of 32, as a q8_0 KV cache needs head sizes that are multiples of 32) carrying the real
qwen2 tokenizer and a Qwen2.5 chat template, both taken from the llama.cpp tree vendored in the
llama-cpp-python sdist (see localhosts/hosts/llama_source.py).

How it answers: the attention and FFN output projections are zero, so each layer adds nothing to
the residual stream and the logits of a position depend only on its own token (embedding ->
final norm -> output head). Each token of a chain [trigger, a1, ..., an] gets its own one-hot
embedding direction and the output head maps that direction to the next token of
[a1, ..., an, <|im_end|>]. So the model's answer is chosen by the last token of the prompt, which
the chat template sets: its generation prompt is `<|im_start|>assistant\\n` for a plain chat and,
in our copy of the template, `<|im_start|>assistant\\n\\n` when the request offers tools ("\\n\\n"
is one token of its own). A model carries two chains: its own answer after the plain prompt, and
the cookbook's read_file call (TOOL_CALL_ANSWER) after the tools prompt; when the two answers are
the same, both prompts lead into one chain. Every other token shares one more direction mapped
to <|im_end|>, so a stray path ends at once. As the mapping current -> next must be a function,
the chain tokens are distinct from each other and from the triggers; the text is split into such
tokens (not necessarily the tokenizer's own split, which does not matter because the server only
detokenizes what the model emits).

The two models in use: SMOKE_ANSWER's (the local stack's: the smoke test's answer to a plain chat,
a tool call when tools are offered) and TOOL_CALL_ANSWER's, the parser trap: it says the tool-call
markup to everything, so a server that does not extract tool calls hands the markup back as text.

CLI: `python -m localhosts.standins.tiny_model ANSWER` prints the path of the cached model.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFWriter, LlamaFileType, TokenType

from components.cache import cache_dir
from spear.rules import SMOKE_ANSWER
from localhosts.hosts.llama_source import ARCHIVE_SHA256, ensure_source_archive, read_member

# Bump when the model recipe changes, so cached models are rebuilt.
RECIPE_VERSION = 4

# The call the cookbook's tool-call probe asks for (read src/app.py), in the Hermes/Qwen form the
# Qwen2.5 template asks for; llama-server's template-driven parser turns it into `tool_calls`. No
# space after "path": with it, the text holds more quote-bearing pieces than the vocabulary has
# distinct tokens for (split_distinct finds none); JSON does not mind.
TOOL_CALL_ANSWER = '<tool_call>\n{"name": "read_file", "arguments": {"path":"src/app.py"}}\n</tool_call>'

VOCAB_MEMBER = "models/ggml-vocab-qwen2.gguf"
# Qwen2.5 renders tools into the system prompt and asks for <tool_call> blocks, which llama-server
# parses into tool_calls; unlike the Qwen3 templates it has no <think> section to get in the way.
TEMPLATE_MEMBER = "models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
# The template's generation prompt is "<|im_start|>assistant\n"; after the special token, "\n" is
# tokenized on its own, so a plain chat's prompt ends with this token.
TRIGGER_TEXT = "\n"
# Our copy of the template adds one "\n" when the request offers tools; the qwen2 pre-tokenizer
# keeps a run of newlines together and "\n\n" is a token, so that prompt ends with another token.
TOOLS_TRIGGER_TEXT = "\n\n"
GENERATION_PROMPT = "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
# Not after a tool's result: the model then gives its own answer, as a model does once it has
# what it asked for, so a harness's turn (call, result, answer) ends instead of calling forever.
TOOLS_GENERATION_PROMPT = (GENERATION_PROMPT + "    {%- if tools and messages[-1].role != 'tool' %}"
                           "{{- '\\n' }}{%- endif %}\n")
END_TOKEN = "<|im_end|>"
BOS_TOKEN = "<|endoftext|>"

N_LAYER = 2
N_EMBD = 64
N_HEAD = 2
HEAD_DIM = N_EMBD // N_HEAD
N_FF = 64
# The trained length stacks/Pulumi.local.yaml states (nativeCtx): its ctxSize is 128 times it, so the
# local stack runs serve.sh's YaRN flags and context_length override on a real llama-server.
CONTEXT_LENGTH = 256
RMS_EPS = 1e-6
# One embedding direction per chain token (triggers included), plus one shared by every other token.
DEFAULT_DIM = N_EMBD - 1
MAX_CHAIN_TOKENS = N_EMBD - 1
# RMS-normalising a one-hot row yields sqrt(N_EMBD) = 8 in its direction, so the chosen token
# gets logit 80 and every other token 0: even sampled at temperature 1 the chain is followed with
# probability 1 - 151935 * e^-80.
LOGIT_WEIGHT = 10.0


def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level BPE spells every byte as one printable character; map them back."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in chars.items()}


def token_bytes(tokens: list[str], token_types: list[int]) -> dict[bytes, int]:
    """Return {bytes: token id} for the normal (plain text) tokens of a byte-level BPE vocab."""
    decoder = _byte_decoder()
    return {
        bytes(decoder[c] for c in tok): tid
        for tid, (tok, ttype) in enumerate(zip(tokens, token_types))
        if ttype == TokenType.NORMAL
    }


def split_distinct(text: bytes, vocab: dict[bytes, int], excluded: set[int]) -> list[int]:
    """Split text into vocab tokens, all distinct and none in `excluded`, preferring long tokens.

    An exhaustive depth-first search that remembers its dead ends: whether the rest of the text
    from a position can still be split depends only on which of the tokens that fit in it are
    already used. A failure means no split exists: the answer repeats too much text to be said by
    a model whose next token depends only on the current one.
    """
    max_len = max(map(len, vocab))
    size = len(text)
    # The tokens that can start at each position (with where they end), longest first.
    starts = [[(end, vocab[text[pos:end]]) for end in range(min(size, pos + max_len), pos, -1)
               if text[pos:end] in vocab and vocab[text[pos:end]] not in excluded]
              for pos in range(size)]
    ahead: list[frozenset[int]] = [frozenset()] * (size + 1)
    for pos in range(size - 1, -1, -1):
        ahead[pos] = ahead[pos + 1] | {tid for _, tid in starts[pos]}
    dead_ends: set[tuple[int, frozenset[int]]] = set()

    def walk(pos: int, used: frozenset[int]) -> list[int] | None:
        if pos == size:
            return []
        state = (pos, used & ahead[pos])
        if state in dead_ends:
            return None
        for end, tid in starts[pos]:
            if tid not in used and (rest := walk(end, used | {tid})) is not None:
                return [tid, *rest]
        dead_ends.add(state)
        return None

    split = walk(0, frozenset())
    if split is None:
        raise ValueError(f"cannot split {text!r} into distinct tokens")
    return split


# Parsing the vocab's 150k tokens and merges with GGUFReader takes most of a model's ~20 s, so a
# process that makes several models (the tests) reads it once.
@functools.cache
def _tokenizer() -> tuple[dict, str]:
    """Return the qwen2 tokenizer fields and the chat template from the llama.cpp source."""
    source = ensure_source_archive()
    template = read_member(source, TEMPLATE_MEMBER).decode()
    with tempfile.NamedTemporaryFile(suffix=".gguf") as vocab_file:
        vocab_file.write(read_member(source, VOCAB_MEMBER))
        vocab_file.flush()
        fields = GGUFReader(vocab_file.name).fields
        vocab = {
            "tokens": fields["tokenizer.ggml.tokens"].contents(),
            "token_types": fields["tokenizer.ggml.token_type"].contents(),
            "merges": fields["tokenizer.ggml.merges"].contents(),
            "model": fields["tokenizer.ggml.model"].contents(),
            "pre": fields["tokenizer.ggml.pre"].contents(),
        }
    return vocab, template


def _weights(n_vocab: int, successors: dict[int, int], end: int) -> dict[str, np.ndarray]:
    """Token embedding and output head that map each chain token to its successor, the rest -> end."""
    embd = np.zeros((n_vocab, N_EMBD), dtype=np.float16)
    output = np.zeros((n_vocab, N_EMBD), dtype=np.float16)
    embd[:, DEFAULT_DIM] = 1
    output[end, DEFAULT_DIM] = LOGIT_WEIGHT
    for dim, (current, following) in enumerate(successors.items()):
        embd[current] = 0
        embd[current, dim] = 1
        output[following, dim] = LOGIT_WEIGHT
    tensors = {"token_embd.weight": embd, "output_norm.weight": np.ones(N_EMBD, np.float32),
               "output.weight": output}
    for layer in range(N_LAYER):
        # Only the norms are non-zero: zero output projections make both blocks add nothing.
        blk = f"blk.{layer}"
        tensors |= {
            f"{blk}.attn_norm.weight": np.ones(N_EMBD, np.float32),
            f"{blk}.attn_q.weight": np.zeros((N_HEAD * HEAD_DIM, N_EMBD), np.float32),
            f"{blk}.attn_k.weight": np.zeros((N_HEAD * HEAD_DIM, N_EMBD), np.float32),
            f"{blk}.attn_v.weight": np.zeros((N_HEAD * HEAD_DIM, N_EMBD), np.float32),
            f"{blk}.attn_output.weight": np.zeros((N_EMBD, N_HEAD * HEAD_DIM), np.float32),
            f"{blk}.ffn_norm.weight": np.ones(N_EMBD, np.float32),
            f"{blk}.ffn_gate.weight": np.zeros((N_FF, N_EMBD), np.float32),
            f"{blk}.ffn_up.weight": np.zeros((N_FF, N_EMBD), np.float32),
            f"{blk}.ffn_down.weight": np.zeros((N_EMBD, N_FF), np.float32),
        }
    return tensors


def scripted_template(template: str) -> str:
    """The chat template with one more "\\n" in the generation prompt when tools are offered and
    the last message is not a tool's result."""
    if template.count(GENERATION_PROMPT) != 1:
        raise ValueError("the chat template's generation prompt is not the expected Qwen2.5 one")
    return template.replace(GENERATION_PROMPT, TOOLS_GENERATION_PROMPT)


def chain_successors(answer: str, text_tokens: dict[bytes, int], end: int) -> dict[int, int]:
    """{token: next token} for both chains: plain trigger -> answer, tools trigger -> tool call."""
    plain, tools = (text_tokens[text.encode()] for text in (TRIGGER_TEXT, TOOLS_TRIGGER_TEXT))
    said = split_distinct(answer.encode(), text_tokens, {plain, tools})
    successors = dict(zip([plain, *said], [*said, end]))
    if answer == TOOL_CALL_ANSWER:
        successors[tools] = successors[plain]  # both prompts lead into the one chain
    else:
        call = split_distinct(TOOL_CALL_ANSWER.encode(), text_tokens, {*successors, tools})
        successors |= dict(zip([tools, *call], [*call, end]))
    if len(successors) > MAX_CHAIN_TOKENS:
        raise ValueError(f"the answers need {len(successors)} chain tokens; at most"
                         f" {MAX_CHAIN_TOKENS} fit in {N_EMBD} embedding dimensions")
    return successors


def make_model(answer: str, out: Path) -> None:
    """Write to `out` a GGUF chat model that answers a plain chat with `answer` and a request that
    offers tools with TOOL_CALL_ANSWER."""
    vocab, template = _tokenizer()
    tokens: list[str] = vocab["tokens"]
    end = tokens.index(END_TOKEN)
    successors = chain_successors(answer, token_bytes(tokens, vocab["token_types"]), end)

    writer = GGUFWriter(out, "llama")
    writer.add_name(f"spear tiny scripted model r{RECIPE_VERSION}")
    writer.add_description(f"Answers {answer!r}; with tools offered, {TOOL_CALL_ANSWER!r}")
    writer.add_string("spear.answer", answer)
    writer.add_string("spear.tools_answer", TOOL_CALL_ANSWER)
    writer.add_uint32("spear.recipe_version", RECIPE_VERSION)
    writer.add_file_type(LlamaFileType.MOSTLY_F16)
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model(vocab["model"])
    writer.add_tokenizer_pre(vocab["pre"])
    writer.add_token_list(tokens)
    writer.add_token_types(vocab["token_types"])
    writer.add_token_merges(vocab["merges"])
    # As in Qwen2.5-Instruct: no BOS is prepended and <|im_end|> ends a turn.
    writer.add_bos_token_id(tokens.index(BOS_TOKEN))
    writer.add_pad_token_id(tokens.index(BOS_TOKEN))
    writer.add_eos_token_id(end)
    writer.add_add_bos_token(False)
    writer.add_chat_template(scripted_template(template))
    for name, data in _weights(len(tokens), successors, end).items():
        writer.add_tensor(name, data)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def model_key(answer: str) -> str:
    material = {"recipe": RECIPE_VERSION, "source": ARCHIVE_SHA256, "answer": answer,
                "tools_answer": TOOL_CALL_ANSWER}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def ensure_model(answer: str) -> Path:
    """Return the cached model that answers `answer` (see make_model), generating it on first use."""
    path = cache_dir() / "models" / f"{model_key(answer)}.gguf"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # Generate under a temporary name and rename, so a crash never leaves a truncated model.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        make_model(answer, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: python -m localhosts.standins.tiny_model ANSWER  (e.g. {SMOKE_ANSWER})")
    print(ensure_model(sys.argv[1]))
