"""A cgroup whose CPU a test can cap while its process runs, removed afterwards. The rollout
gate's test gives a candidate's llama-server a tenth of a core for the gate's latency step, so it
answers that step as a slower engine would (the tiny model is too fast for any server flag alone
to move its TTFT, and at that pace the gate's other steps would take minutes)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from components.hostops.waiting import wait_until

PERIOD_US = 100_000


@dataclass(frozen=True)
class CpuCap:
    cgroup: Path
    quota_file: str  # cpu.cfs_quota_us (cgroup v1) or cpu.max (v2)

    @property
    def launcher(self) -> list[str]:
        """The command prefix that starts a process in the cgroup, keeping its pid (preexec_fn
        would not be safe with the test's threads)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.cgroup / "cgroup.procs")]

    def limit(self, share: float | None) -> None:
        """Allow the cgroup `share` of one CPU from now on (None: no limit)."""
        quota = None if share is None else max(1000, int(share * PERIOD_US))
        text = (f"{quota or 'max'} {PERIOD_US}" if self.quota_file == "cpu.max"
                else str(quota or -1))
        (self.cgroup / self.quota_file).write_text(text)


def _hierarchy() -> tuple[Path, str]:
    """cgroup v1's cpu controller, or a cgroup v2 root that already hands the cpu controller to
    its children (not enabled here: that would change the machine for everything else)."""
    v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
    if (v1 / "cpu.cfs_quota_us").exists():
        return v1, "cpu.cfs_quota_us"
    with contextlib.suppress(OSError):
        if "cpu" in (v2 / "cgroup.subtree_control").read_text().split():
            return v2, "cpu.max"
    raise RuntimeError("no cgroup hierarchy with the cpu controller: cannot cap a process's CPU")


@contextlib.contextmanager
def cpu_cap(name: str) -> Iterator[CpuCap]:
    """A cgroup without a limit yet; removed once its processes are gone."""
    hierarchy, quota_file = _hierarchy()
    cgroup = hierarchy / f"spear-fleet-test-{name}-{os.getpid()}"
    cgroup.mkdir()
    try:
        yield CpuCap(cgroup, quota_file)
    finally:
        def removed() -> bool:
            with contextlib.suppress(OSError):  # busy while its last process exits
                cgroup.rmdir()
            return not cgroup.exists()

        wait_until(removed, 10.0, interval=0.2)
