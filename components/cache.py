"""The one cache folder for everything slow that the project makes (see docs/DESIGN.md)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("SPEAR_CACHE") or Path.home() / ".cache" / "spear-fleet")


def build_once(done: Path, build: Callable[[], None]) -> None:
    """Runs `build` unless `done` exists, under a lock in its folder, so parallel callers (test
    workers, hosts coming up together) build it once. `build` makes `done` last, atomically: a
    `done` that exists is complete."""
    if done.exists():
        return
    done.parent.mkdir(parents=True, exist_ok=True)
    with open(done.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build()
