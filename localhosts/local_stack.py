"""The embedded default: a local systemd host, and the files the `local` stack installs on it.

The host is an nspawn container (localhosts/host.py). Its llama.cpp build folder and ccache
live in the cache on this machine (bind mounts), so a re-created host, or a test host, reuses a
finished build of the same key instead of spending 20 minutes on it again.

    python -m localhosts.local_stack up [--fresh]   # boot the `local` host, make its files
    python -m localhosts.local_stack down
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localhosts import llama_source, tiny_model
from localhosts.host import HostInfo, start_host, stop_host
from spear.cache import cache_dir

LOCAL_HOST = "local"
LOCAL_SSH_PORT = 2222  # matches stacks/Pulumi.local.yaml
RUNTIME_DIR = "/opt/spear"


def host_binds() -> list[tuple[str, str]]:
    cache = cache_dir()
    binds = [(cache / "llama-builds", f"{RUNTIME_DIR}/builds"), (cache / "ccache", "/root/.cache/ccache")]
    for src, _ in binds:
        src.mkdir(parents=True, exist_ok=True)
    return [(str(src), dst) for src, dst in binds]


def ensure_files() -> tuple[llama_source.SourceArchive, Path]:
    """The llama.cpp source archive and the smoke-test model the local stack names."""
    return llama_source.ensure_source_archive(), tiny_model.ensure_model(tiny_model.SMOKE_ANSWER)


def start(name: str = LOCAL_HOST, ssh_port: int = LOCAL_SSH_PORT, fresh: bool = False) -> HostInfo:
    """Boot host `name` with the local stack's binds, once the files its stack names exist."""
    ensure_files()
    return start_host(name, ssh_port, host_binds(), fresh=fresh)


def stop(name: str = LOCAL_HOST) -> None:
    """Power host `name` off (the counterpart of start)."""
    stop_host(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localhosts.local_stack")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="boot the local host and make the files its stack names")
    up.add_argument("--fresh", action="store_true", help="start from a clean root filesystem")
    sub.add_parser("down", help="stop the local host")
    args = parser.parse_args(argv)
    if args.command == "up":
        info = start(fresh=args.fresh)
        print(f"local host up: ssh -i {info.private_key_path} -p {info.ssh_port} root@127.0.0.1",
              file=sys.stderr)
    else:
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
