"""Prints a replay trace with Poisson arrivals (the format and generator: spear/trace.py).

`python -m gate.trace --requests 48 --rate 6 --seed 1`: a team shapes one like its own traffic.
"""

from __future__ import annotations

import argparse
import json
import sys

from spear.trace import generate


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
