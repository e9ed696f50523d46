"""Runs a command, passing its output through, and says what is still running whenever it has
been silent for a while: a test waiting 20 minutes for a build the background is making, or a
`pulumi up` inside a long resource, would otherwise print nothing.

    python -m localhosts.progress [--every SECONDS] [--what TEXT] [--log NAME=FILE ...] -- COMMAND ...

Each heartbeat names what runs (--what, else the command), how long it has run, and the last line of each named log (the
background builds' and tests' logs). Exits with the command's status.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def last_line(path: Path) -> str:
    """The last non-empty line of a log, read from its end (logs grow to megabytes)."""
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
            lines = [line for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log yet"
    return lines[-1].strip()[:160] if lines else "nothing logged yet"


def run(command: list[str], logs: dict[str, Path], every: float, what: str) -> int:
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    started = last_output = time.monotonic()

    def forward(source, sink) -> None:
        nonlocal last_output
        # read1: whatever is there, so pytest's progress dots pass through as they come.
        while chunk := source.read1(65536):
            last_output = time.monotonic()
            sink.write(chunk)
            sink.flush()

    pumps = [threading.Thread(target=forward, args=(child.stdout, sys.stdout.buffer)),
             threading.Thread(target=forward, args=(child.stderr, sys.stderr.buffer))]
    for pump in pumps:
        pump.start()
    while True:
        try:
            child.wait(timeout=max(0.0, last_output + every - time.monotonic()))
            break
        except subprocess.TimeoutExpired:
            if time.monotonic() - last_output < every:
                continue
            minutes = (time.monotonic() - started) / 60
            logs_said = "".join(f"; {name}: {last_line(path)}" for name, path in logs.items())
            print(f"\nprogress: {what} still running after"
                  f" {minutes:.1f} min{logs_said}", file=sys.stderr, flush=True)
            last_output = time.monotonic()
    for pump in pumps:
        pump.join()
    return child.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localhosts.progress",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=60.0,
                        help="seconds of silence before each heartbeat (default 60)")
    parser.add_argument("--what", help="what the command does, for the heartbeat (default: its name)")
    parser.add_argument("--log", action="append", default=[], metavar="NAME=FILE",
                        help="a log whose last line each heartbeat shows")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    logs = {}
    for given in args.log:
        name, sep, file = given.partition("=")
        if not sep or not name or not file:
            parser.error(f"--log {given!r}: allowed is NAME=FILE")
        logs[name] = Path(file)
    return run(args.command, logs, args.every, args.what or os.path.basename(args.command[0]))


if __name__ == "__main__":
    sys.exit(main())
