"""The one cache folder for everything slow that the project makes (see docs/DESIGN.md)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("SPEAR_CACHE") or Path.home() / ".cache" / "spear-fleet")
