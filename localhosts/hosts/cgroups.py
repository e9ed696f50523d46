"""Per-host cgroups: each host's systemd-nspawn starts in a cgroup of its own."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from components.hostops.waiting import wait_until
from localhosts.report import HostError, log

# Each host's nspawn runs in <cgroup hierarchy>/CGROUP_PARENT/<name>: with --keep-unit nspawn puts
# its payload/ and supervisor/ cgroups under the cgroup it was started in, so two hosts started
# from the same cgroup would share (and fight over) one system.slice tree.
CGROUP_PARENT = "spear-fleet"
# How long the cgroups of a killed host may stay busy before they are left in place.
RELEASE_TIMEOUT = 10.0


def _cgroup_mounts() -> dict[str, str]:
    """Mounted cgroup hierarchies: mount point -> filesystem type (cgroup or cgroup2)."""
    mounts = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, target, fstype, *_ = line.split()
        if fstype in ("cgroup", "cgroup2"):
            mounts[target] = fstype
    return mounts


def host_cgroup(name: str) -> Path:
    """Create (empty) and return the host's own cgroup v2 directory for its nspawn process."""
    unified = [Path(target) for target, fstype in _cgroup_mounts().items() if fstype == "cgroup2"]
    if not unified:
        raise HostError("no cgroup2 hierarchy mounted: the hosts' systemd needs cgroup v2")
    remove_host_cgroups(name)  # leftovers of a killed host
    cgroup = unified[0] / CGROUP_PARENT / name
    cgroup.mkdir(parents=True, exist_ok=True)
    return cgroup


def remove_host_cgroups(name: str) -> None:
    """Remove the host's (empty) cgroups, in every hierarchy: on hybrid machines nspawn mirrors
    them into name=systemd (v1)."""
    tops = [Path(target) / CGROUP_PARENT / name for target in _cgroup_mounts()]
    busy: list[str] = []

    def removed() -> bool:
        busy.clear()
        for top in filter(Path.is_dir, tops):
            for dirpath, _, _ in os.walk(top, topdown=False):
                try:
                    os.rmdir(dirpath)
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        raise
                    busy.append(dirpath)
        return not busy

    if not wait_until(removed, RELEASE_TIMEOUT, interval=0.2):
        # A killed container's init stays a zombie until PID 1 reaps it, keeping its v1 cgroup
        # busy; an empty cgroup left behind is harmless and is reused by the next start.
        log(f"warning: cgroups still busy, left in place: {' '.join(busy)}")
