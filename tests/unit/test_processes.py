"""Stopping a set of processes (localhosts/servers/processes.py::terminate): asked first, killed when they
do not go in time."""

from __future__ import annotations

import subprocess
import sys
import time

from localhosts.servers.processes import terminate

IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"


def test_processes_that_stop_when_asked_are_stopped_with_sigterm():
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    terminate(lambda: [c.pid for c in children if c.poll() is None], timeout=10)
    assert [c.wait(timeout=5) for c in children] == [-15, -15]


def test_a_process_that_ignores_sigterm_is_killed_after_the_timeout():
    child = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE)
    child.stdout.readline()  # its handler is in place
    started = time.monotonic()
    terminate(lambda: [child.pid] if child.poll() is None else [], timeout=0.5)
    assert child.wait(timeout=5) == -9
    assert time.monotonic() - started >= 0.5
