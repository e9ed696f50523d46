"""A test's servers: a free port to start one on (tests run beside each other, so a fixed port
may be another test's), and stopping one: asked first, killed when it does not go in time."""

from __future__ import annotations

import socket
import subprocess


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
