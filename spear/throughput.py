"""The fleet's throughput after an engine change (seed 001 "How to maintain it": re-measure
after every engine bump), pure: the requests, the rates from their timings, and the comparison
with the last measurement.

Without streaming, from whole answers (so any vantage that can POST measures it):
- prefill: a long prompt with max_tokens 1: prompt tokens / seconds (the prompt is halved until
  the server's window per request takes it: a server may split its window between slots);
- decode: a short prompt with max_tokens DECODE_TOKENS and ignore_eos (vLLM's sampling extra,
  which llama-server shares), less the same prompt's time with max_tokens 1 (its prefill and the
  round trip): (completion tokens - 1) / the difference.
Token counts are the server's own (`usage`); each rate is the median of ROUNDS rounds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

ROUNDS = 3
DECODE_TOKENS = 64
# The long prompt: a word per 16 tokens of the served window (a word is about two tokens, so an
# eighth of the window: it fits a slot of a server that splits its window between a few).
WINDOW_TOKENS_PER_WORD = 16
MAX_PREFILL_WORDS = 512
RATES = ("prefill_tokens_per_second", "decode_tokens_per_second")


MIN_PREFILL_WORDS = 16


def prefill_words(max_model_len: int) -> int:
    """The long prompt's length to try first; a server whose window per request is smaller than
    its max_model_len says so (HTTP 400), and the prompt is halved (shorter_prompt)."""
    return min(MAX_PREFILL_WORDS, max(MIN_PREFILL_WORDS, max_model_len // WINDOW_TOKENS_PER_WORD))


def shorter_prompt(words: int, status: int, answer: bytes) -> int | None:
    """The next length after an answer that refused the prompt as too long for the window; None
    when the answer was another failure or the prompt cannot get shorter."""
    too_long = status == 400 and b"context" in answer.lower()
    return words // 2 if too_long and words // 2 >= MIN_PREFILL_WORDS else None


def prefill_body(model: str, words: int) -> dict[str, Any]:
    text = " ".join(f"w{i % 97}" for i in range(words))
    return {"model": model, "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "user", "content": f"Summarise: {text}"}]}


def decode_body(model: str, max_tokens: int = DECODE_TOKENS) -> dict[str, Any]:
    return {"model": model, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": "Count upwards from one."}]}


def usage(answer: dict[str, Any]) -> tuple[int, int]:
    """(prompt tokens, completion tokens) the server reports."""
    counts = answer.get("usage") or {}
    return int(counts.get("prompt_tokens") or 0), int(counts.get("completion_tokens") or 0)


@dataclass(frozen=True)
class Round:
    prefill_tokens: int
    prefill_seconds: float
    decode_tokens: int  # completion tokens of the decode request
    decode_seconds: float
    first_token_seconds: float  # the decode prompt with max_tokens 1


def rates(rounds: list[Round]) -> dict[str, float]:
    """The medians, in tokens per second; a rate whose request took no measurable time is a
    measurement error, not infinity."""
    prefill = [r.prefill_tokens / r.prefill_seconds for r in rounds if r.prefill_seconds > 0]
    decode = [(r.decode_tokens - 1) / (r.decode_seconds - r.first_token_seconds)
              for r in rounds if r.decode_seconds > r.first_token_seconds and r.decode_tokens > 1]
    if not prefill or not decode:
        raise ValueError(f"throughput: no usable round in {rounds}")
    return {"prefill_tokens_per_second": round(statistics.median(prefill), 2),
            "decode_tokens_per_second": round(statistics.median(decode), 2)}


def compared(now: dict[str, float], last: dict[str, Any] | None) -> dict[str, float] | None:
    """Each rate as a share of the last measurement's; None without one."""
    if not last or not all(last.get(rate) for rate in RATES):
        return None
    return {rate: round(now[rate] / float(last[rate]), 3) for rate in RATES}


def drop_problem(now: dict[str, float], last: dict[str, Any] | None, last_pair: Any,
                 pair: Any, min_ratio: float | None) -> str | None:
    """Why this measurement fails against the last one (a rate below min_ratio of it); None
    when it does not, or when the stack sets no min_ratio."""
    ratios = compared(now, last)
    if min_ratio is None or ratios is None:
        return None
    low = [f"{rate.split('_')[0]} {now[rate]:g} tokens/s is {ratios[rate]:g} of the last"
           f" {float(last[rate]):g}" for rate in RATES if ratios[rate] < min_ratio]
    if not low:
        return None
    return (f"throughput after the change from {last_pair} to {pair}: {'; '.join(low)}"
            f" (throughputMinRatio {min_ratio:g})")
