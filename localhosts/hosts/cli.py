"""Local "real systemd hosts": Debian bookworm booted with systemd-nspawn, reachable by SSH.

The command line of localhosts/hosts/host.py and localhosts/hosts/rootfs.py; it prints HostInfo as JSON on
stdout, progress on stderr:
    python -m localhosts.hosts.cli up NAME --ssh-port P [--bind SRC:DST ...] [--keep]
    python -m localhosts.hosts.cli down NAME
    python -m localhosts.hosts.cli status NAME
    python -m localhosts.hosts.cli rootfs
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from localhosts.hosts.host import host_status, start_host, stop_host
from localhosts.report import HostError
from localhosts.hosts.rootfs import ensure_rootfs


def _bind_arg(value: str) -> tuple[str, str]:
    src, sep, dst = value.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected SRC:DST, got {value!r}")
    return src, dst


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localhosts.hosts.cli", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="boot a host and print its HostInfo as JSON")
    up.add_argument("name")
    up.add_argument("--ssh-port", type=int, required=True)
    up.add_argument("--bind", type=_bind_arg, action="append", default=[], metavar="SRC:DST")
    up.add_argument("--keep", action="store_true", help="reuse the existing root filesystem (fresh=False)")
    down = sub.add_parser("down", help="power a host off")
    down.add_argument("name")
    down.add_argument("--discard", action="store_true", help="also delete its root filesystem")
    status = sub.add_parser("status", help="print HostInfo as JSON (null and exit 1 if not running)")
    status.add_argument("name")
    sub.add_parser("rootfs", help="build the cached rootfs tarball if needed and print its path")
    args = parser.parse_args(argv)

    try:
        if args.command == "up":
            info = start_host(args.name, args.ssh_port, args.bind, fresh=not args.keep)
            print(json.dumps(info.as_dict(), indent=2))
        elif args.command == "down":
            stop_host(args.name, discard=args.discard)
        elif args.command == "status":
            info = host_status(args.name)
            print(json.dumps(info and info.as_dict(), indent=2))
            return 0 if info else 1
        else:
            print(ensure_rootfs())
    except HostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
