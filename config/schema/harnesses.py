"""`harnesses`: the version of each coding harness developers run against the gateway, exact
releases only: seed 001 records the harness versions in the rollout's pin (scripts/gate's records
carry them) and a harness bump rides the same gate as a model change. Each defaults to the
version the wiring was measured with (spear/harness.py::DEFAULT_VERSIONS); a bump changes the
`harnesses` stack output and the gateway's `harness_versions`, so `pulumi preview` shows it.
A version the stack sets needs its lockfile committed in the project (spear/harness.py::LOCKS),
which the seats install from: one without it is refused here, before any resource exists (the
defaults' own are committed with them, tests/unit/test_harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from config.checker import Checker
from config.options import INVALID, Kind, Obj, Opt
from spear.harness import (DEFAULT_VERSIONS, EXACT_VERSION, EXACT_VERSION_TEXT, HARNESSES, LOCK_FILES,
                           PACKAGES, lock_folder, lock_problem)


@dataclass(frozen=True)
class LockedVersion(Kind):
    """A harness's exact version whose lock folder config/load.py reads before the check."""
    harness: str
    allowed: str = EXACT_VERSION_TEXT

    def normal(self, value: Any) -> Any:
        return value if isinstance(value, str) and EXACT_VERSION.fullmatch(value) else INVALID

    def read(self, check: Checker, key: str, value: Any) -> Any:
        version = super().read(check, key, value)
        if version is None:
            return None
        folder = lock_folder(self.harness, version)
        found = {name: check.files.get(f"{folder}/{name}") for name in LOCK_FILES[PACKAGES[self.harness][0]]}
        problem = lock_problem(self.harness, version, {name: data if isinstance(data, bytes) else None
                                                       for name, data in found.items()})
        if problem:
            check.report(key, f"{version}, whose lockfile in {folder}/ does not stand ({problem})",
                         f"a version with its lockfile committed: `scripts/harness-lock"
                         f" {self.harness} {version}` writes it")
            return None
        return version

    def schema(self) -> dict:
        return {"type": "string", "pattern": f"^(?:{EXACT_VERSION.pattern})$"}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        if self.normal(value) is not INVALID:
            yield lock_folder(self.harness, value), True


OPTIONS = {"harnesses": Opt(Obj({harness: Opt(LockedVersion(harness),
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
