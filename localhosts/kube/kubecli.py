"""The command line of localhosts/kube/kubecluster.py; it prints ClusterInfo as JSON on stdout,
progress on stderr:
    python -m localhosts.kube.kubecli up NAME [--gpus N] [--image ARCHIVE ...] [--fresh]
    python -m localhosts.kube.kubecli down NAME
    python -m localhosts.kube.kubecli status NAME
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from pathlib import Path

from localhosts.kube.kubecluster import DEFAULT_GPUS, cluster_status, start_cluster, stop_cluster
from localhosts.report import HostError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localhosts.kube.kubecli", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a cluster (or find it running) and print its ClusterInfo as JSON")
    up.add_argument("name")
    up.add_argument("--gpus", type=int, default=DEFAULT_GPUS, help="the node's nvidia.com/gpu capacity")
    up.add_argument("--image", type=Path, action="append", default=[],
                    help="an OCI image archive to load into the node")
    up.add_argument("--fresh", action="store_true", help="start from an empty etcd")
    sub.add_parser("down", help="stop every process of a cluster").add_argument("name")
    status = sub.add_parser("status", help="print ClusterInfo as JSON (null and exit 1 if not running)")
    status.add_argument("name")
    args = parser.parse_args(argv)

    try:
        if args.command == "up":
            info = start_cluster(args.name, args.gpus, args.image, fresh=args.fresh)
            print(json.dumps(info.as_dict(), indent=2))
        elif args.command == "down":
            stop_cluster(args.name)
        else:
            info = cluster_status(args.name)
            print(json.dumps(info and info.as_dict(), indent=2))
            return 0 if info else 1
    except HostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
