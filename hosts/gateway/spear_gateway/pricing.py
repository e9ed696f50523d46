"""What a request may cost at most, and what it did cost, from a model's per-token prices.

The worst case is what admission holds: the request's output limit priced at the output price,
plus an upper bound of its prompt priced at the input price. The bound is the UTF-8 size of
everything the prompt is made of, serialized as JSON: a byte-level BPE token covers at least one
byte, and the JSON's keys and quotes more than cover a chat template's per-message tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

# The request fields a prompt is made of, in the three dialects the gateway speaks.
PROMPT_FIELDS = ("messages", "system", "tools", "functions", "tool_choice", "input",
                 "instructions", "prompt")
# The output limit's name in each dialect (chat completions, Responses, legacy).
LIMIT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
TEMPLATE_ALLOWANCE = 64  # a chat template's fixed tokens around the whole prompt


@dataclass(frozen=True)
class Prices:
    """USD per token."""

    input: float
    output: float


def prompt_tokens_upper_bound(body: Mapping[str, Any]) -> int:
    parts = {k: body[k] for k in PROMPT_FIELDS if body.get(k) is not None}
    return len(json.dumps(parts, ensure_ascii=False, default=str).encode()) + TEMPLATE_ALLOWANCE


def output_limit(body: Mapping[str, Any]) -> int | None:
    """The smallest output limit the request sets, or None."""
    limits = [body[k] for k in LIMIT_FIELDS if type(body.get(k)) is int and body[k] > 0]
    return min(limits) if limits else None


def worst_case_usd(body: Mapping[str, Any], prices: Prices, limit: int) -> float:
    return prompt_tokens_upper_bound(body) * prices.input + limit * prices.output


def usage_usd(usage: Mapping[str, Any] | None, prices: Prices) -> float:
    """A response's usage priced: OpenAI's prompt/completion tokens or Anthropic's
    input/output tokens."""
    usage = usage or {}
    prompt = usage.get("prompt_tokens", usage.get("input_tokens")) or 0
    completion = usage.get("completion_tokens", usage.get("output_tokens")) or 0
    return prompt * prices.input + completion * prices.output


def usage_of(response: Any) -> dict[str, Any]:
    """A response's (or a stream chunk's) usage as a dict; {} when it has none."""
    usage = getattr(response, "usage", None)
    if usage is None and isinstance(response, dict):
        usage = response.get("usage")
    if hasattr(usage, "model_dump"):
        usage = usage.model_dump()
    return usage if isinstance(usage, dict) else {}


@dataclass
class StreamedUsage:
    """What a stream carried so far: the chunks with output (a token each), and the usage a
    chunk reported, if one did (stream_options.include_usage)."""

    output_chunks: int = 0
    reported: dict[str, Any] | None = None

    def add(self, chunk: Any) -> None:
        if isinstance(chunk, (bytes, str)):  # an SSE event passed through as it came
            text = chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else chunk
            if "content_block_delta" in text or ('"delta"' in text and '"content": "' in text):
                self.output_chunks += 1
            return
        usage = usage_of(chunk)
        if usage.get("prompt_tokens") or usage.get("completion_tokens"):
            self.reported = usage
        for choice in getattr(chunk, "choices", None) or []:
            delta = getattr(choice, "delta", None)
            if delta is not None and (getattr(delta, "content", None)
                                      or getattr(delta, "tool_calls", None)):
                self.output_chunks += 1
                break

    def usage(self, prompt_upper_bound: int) -> dict[str, int]:
        """What to charge: the reported usage, else the prompt's upper bound (what the upstream
        was asked) and the output chunks sent."""
        reported = self.reported or {}
        return {"prompt_tokens": int(reported.get("prompt_tokens") or prompt_upper_bound),
                "completion_tokens": max(int(reported.get("completion_tokens") or 0),
                                         self.output_chunks)}
