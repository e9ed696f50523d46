"""`harnesses`: the version of each coding harness developers run against the gateway, exact
releases only: seed 001 records the harness versions in the rollout's pin (scripts/gate's records
carry them) and a harness bump rides the same gate as a model change. Each defaults to the
version the wiring was measured with (spear/harness.py::DEFAULT_VERSIONS); a bump changes the
`harnesses` stack output and the gateway's `harness_versions`, so `pulumi preview` shows it."""

from __future__ import annotations

from typing import Any

from config.checker import MISSING, Checker, get
from spear.harness import DEFAULT_VERSIONS, EXACT_VERSION, EXACT_VERSION_TEXT, HARNESSES

KEYS = ("harnesses",)


def parse(check: Checker, value: Any, has_gateway: bool) -> dict[str, str]:
    """harness -> version, for every harness."""
    if value is not MISSING and not has_gateway:
        check.report("harnesses", "harness versions without a gateway",
                     "harnesses only with `gateway` (the harnesses are wired to it)")
        return dict(DEFAULT_VERSIONS)
    given = check.obj("harnesses", value, HARNESSES, required=False)
    if given is None:
        return dict(DEFAULT_VERSIONS)
    return {harness: check.pattern(f"harnesses.{harness}", get(given, harness), EXACT_VERSION,
                                   EXACT_VERSION_TEXT, default=DEFAULT_VERSIONS[harness])
            for harness in HARNESSES}
