"""Faults injected into a local host (localhosts/hosts/host.py) while `pulumi up` works on it.

The host's processes are reached through its namespaces (nsenter into its init), not over SSH:
the fault cuts SSH, so nothing that goes through SSH can be used to see it or to cause it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from components.hostops.waiting import wait_until
from localhosts.hosts.host import host_status


def _init_pid(host: str) -> int:
    """The host's PID 1, seen from this machine: systemd-nspawn's child."""
    info = host_status(host)
    if info is None:
        raise RuntimeError(f"host {host} is not running")
    children = Path(f"/proc/{info.pid}/task/{info.pid}/children").read_text().split()
    return int(children[0])


def on_host(host: str, command: list[str], check: bool = True) -> str:
    """Runs `command` in the host's mount and PID namespaces (its /proc, its systemd)."""
    done = subprocess.run(["nsenter", "-t", str(_init_pid(host)), "-m", "-p", "--", *command],
                          capture_output=True, text=True, check=check)
    return done.stdout.strip()


def main_pid(host: str, unit: str) -> str:
    return on_host(host, ["systemctl", "show", "-p", "MainPID", "--value", unit])


def wait_for_restart(host: str, unit: str, before: str, timeout: float = 600) -> None:
    """Waits until `unit` runs under another main process than `before` (it restarted)."""
    if not wait_until(lambda: main_pid(host, unit) not in (before, "0"), timeout, interval=0.2):
        raise AssertionError(f"{unit} on {host} did not restart in {timeout} s")


def cut_ssh(host: str) -> int:
    """Kills every SSH session on the host (sshd's listener stays, so a new login works), as a
    dropped network would end them; returns how many processes were killed."""
    sessions = on_host(host, ["pgrep", "-f", "^sshd: [a-z]"], check=False).split()  # 1: none
    if sessions:
        on_host(host, ["kill", "-KILL", *sessions], check=False)  # one may have ended meanwhile
    return len(sessions)


def _descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
        for child in children:
            found += [child, *_descendants(child)]
    return found


def kill_engine(update: subprocess.Popen) -> None:
    """SIGKILL to `pulumi up` and everything it started, as when the machine running it dies:
    nothing gets to clean up. Its language host and providers run in process groups of their
    own, so each is found and killed, not only the CLI's group."""
    for pid in [update.pid, *_descendants(update.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    update.wait()
