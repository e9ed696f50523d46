"""How the local hosts library reports: progress lines on stderr, failures as HostError."""

from __future__ import annotations

import sys


class HostError(RuntimeError):
    """A host could not be built, started, found or stopped; the message says why."""


def log(msg: str) -> None:
    """Print one progress line on stderr."""
    # stderr, so that the CLI's stdout stays pure JSON for the shell scripts that parse it.
    print(f"[nspawn] {msg}", file=sys.stderr, flush=True)
