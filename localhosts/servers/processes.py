"""Servers this machine starts: a free port to start one on (servers run beside each other, so a
fixed port may be another's), and stopping one or a set of processes: asked first, killed when
they do not go in time."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(process: subprocess.Popen, timeout: float) -> None:
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def terminate(pids: Callable[[], Collection[int]], timeout: float) -> None:
    """SIGTERM to every process `pids()` names, again until none is left; SIGKILL after
    `timeout`. Asked again each round: a process may start others while it stops."""
    deadline = time.monotonic() + timeout
    sig = signal.SIGTERM
    while left := pids():
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if time.monotonic() >= deadline:
            sig = signal.SIGKILL
        time.sleep(0.2)
