"""The one cache folder for everything slow that the project makes (see docs/DESIGN.md)."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("SPEAR_CACHE") or Path.home() / ".cache" / "spear-fleet")


def build_once(done: Path, build: Callable[[], None], what: str | None) -> None:
    """Runs `build` unless `done` exists, under a lock in its folder, so parallel callers (test
    workers, hosts coming up together) build it once. `build` makes `done` last, atomically: a
    `done` that exists is complete. Says on stderr whether `what` was cached or built, and how
    long the build took: a first run's slow steps are named, not silent. `what` None: nothing is
    said (a build inside the Pulumi program, whose stderr would read as a diagnostic)."""
    say = _say if what else (lambda _: None)
    if done.exists():
        say(f"{what}: cached")
        return
    done.parent.mkdir(parents=True, exist_ok=True)
    with open(done.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            say(f"{what}: cached (built by another caller meanwhile)")
            return
        started = time.monotonic()
        say(f"{what}: building (first time only)")
        build()
        say(f"{what}: built in {time.monotonic() - started:.0f} s")


def _say(message: str) -> None:
    print(f"spear-fleet: {message}", file=sys.stderr, flush=True)
