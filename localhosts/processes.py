"""Stopping a server this machine started: asked first, killed when it does not go in time."""

from __future__ import annotations

import subprocess


def stop(process: subprocess.Popen, timeout: float) -> None:
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
