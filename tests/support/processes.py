"""A free port to start a test's server on: tests run beside each other, so a fixed port may be
another test's (stopping one: localhosts/processes.py)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
