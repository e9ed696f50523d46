"""`harnesses`: the version of each coding harness developers run against the gateway, exact
releases only: seed 001 records the harness versions in the rollout's pin (scripts/gate's records
carry them) and a harness bump rides the same gate as a model change. Each defaults to the
version the wiring was measured with (spear/harness.py::DEFAULT_VERSIONS); a bump changes the
`harnesses` stack output and the gateway's `harness_versions`, so `pulumi preview` shows it."""

from __future__ import annotations

from typing import Any

from config.checker import Checker
from config.options import Obj, Opt, pattern
from spear.harness import DEFAULT_VERSIONS, EXACT_VERSION, EXACT_VERSION_TEXT, HARNESSES

OPTIONS = {"harnesses": Opt(Obj({harness: Opt(pattern(EXACT_VERSION, EXACT_VERSION_TEXT),
                                              f"the {harness} release developers run",
                                              default=DEFAULT_VERSIONS[harness])
                                 for harness in HARNESSES}),
                            "each coding harness's exact version (only with gateway)", default={})}


def parse(check: Checker, value: Any) -> dict[str, str]:
    """harness -> version, for every harness."""
    versions = OPTIONS["harnesses"].read(check, "harnesses", value)
    if versions is None:
        return dict(DEFAULT_VERSIONS)
    return {harness: version or DEFAULT_VERSIONS[harness] for harness, version in versions.items()}
