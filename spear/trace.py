"""Replay traces for the gate's latency step and the gateway benchmark.

A trace is JSON: {"requests": [{"offset": seconds after the start, "promptWords": n,
"maxTokens": m}, ...]}, sorted by offset. `generate` makes one with Poisson arrivals
(exponential gaps at `rate` per second) and prompt and output lengths drawn uniformly from the
given ranges, so a team can make one shaped like its own traffic (or convert a gateway log to
this form); `python -m gate.trace` prints it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Arrival:
    offset: float
    prompt_words: int
    max_tokens: int


def generate(requests: int, rate: float, prompt_words: tuple[int, int], max_tokens: tuple[int, int],
             seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    offset, out = 0.0, []
    for _ in range(requests):
        out.append({"offset": round(offset, 4), "promptWords": rng.randint(*prompt_words),
                    "maxTokens": rng.randint(*max_tokens)})
        offset += rng.expovariate(rate)
    return {"requests": out}


def parse(value: Mapping[str, Any]) -> tuple[Arrival, ...]:
    """The arrivals of a trace; ValueError naming what is wrong."""
    requests = value.get("requests") if isinstance(value, Mapping) else None
    if not isinstance(requests, list) or not requests:
        raise ValueError("a trace is {\"requests\": [{offset, promptWords, maxTokens}, ...]}")
    arrivals = []
    for i, item in enumerate(requests):
        try:
            arrival = Arrival(float(item["offset"]), int(item["promptWords"]), int(item["maxTokens"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"requests[{i}]: offset (seconds), promptWords and maxTokens") from None
        if arrival.offset < 0 or arrival.prompt_words < 1 or arrival.max_tokens < 1 \
                or (arrivals and arrival.offset < arrivals[-1].offset):
            raise ValueError(f"requests[{i}]: offsets >= 0 and sorted, lengths >= 1")
        arrivals.append(arrival)
    return tuple(arrivals)
