"""Replay traces for the gate's latency step and the gateway benchmark.

A trace is JSON: {"requests": [{"offset": seconds after the start, "promptWords": n,
"maxTokens": m}, ...]}, sorted by offset. `python -m gate.trace --requests 48 --rate 6 --seed 1`
prints one with Poisson arrivals (exponential gaps at `rate` per second) and prompt and output
lengths drawn uniformly from the given ranges, so a team can make one shaped like its own
traffic (or convert a gateway log to this form).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gate.trace", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--rate", type=float, default=6.0, help="arrivals per second")
    parser.add_argument("--prompt-words", type=int, nargs=2, default=(20, 200), metavar=("MIN", "MAX"))
    parser.add_argument("--max-tokens", type=int, nargs=2, default=(16, 64), metavar=("MIN", "MAX"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    json.dump(generate(args.requests, args.rate, tuple(args.prompt_words), tuple(args.max_tokens),
                       args.seed), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
