"""Rollback of the vLLM fleet in one command (seed 001 "How to maintain it": the previous (image,
revision) pair stays deployable; a rollback that needs a rebuild is not a rollback).

CLI: `scripts/rollback --stack NAME [--yes]`. It reads the stack's `vllmFleet`, sets
`vllmFleet.stable` to the declared `vllmFleet.previous` pair with `pulumi config set`, drops a
canary that serves the pair being rolled back from, and runs `pulumi up`. The config check
accepts the result without a gate record (stable == previous is a rollback), and Kubernetes
rolls the stable Deployment back to the previous image and revision. The same is a manual
edit of the stack file followed by `pulumi up`: this only saves the typing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

NAMESPACE = "spear-fleet"
PAIR_KEYS = ("tag", "digest", "model", "revision")


class RollbackError(Exception):
    pass


def plan(fleet: Mapping[str, Any]) -> list[list[str]]:
    """The `pulumi config` arguments that make the previous pair stable again (pure)."""
    previous = fleet.get("previous")
    if not isinstance(previous, Mapping):
        raise RollbackError("vllmFleet.previous is not declared: there is no pair to roll back"
                            " to (declare the pair stable had before the last promotion)")
    stable = fleet.get("stable") or {}
    if all(stable.get(k) == previous.get(k) for k in PAIR_KEYS):
        raise RollbackError("vllmFleet.stable is already the previous pair: nothing to roll back")
    key = f"{NAMESPACE}:vllmFleet"
    commands = [["config", "rm", "--path", f"{key}.stable"]]
    commands += [["config", "set", "--path", f"{key}.stable.{k}", str(previous[k]), "--type", "string"]
                 for k in PAIR_KEYS if previous.get(k) is not None]
    canary = fleet.get("canary") or {}
    if canary and all(canary.get(k) == stable.get(k) for k in PAIR_KEYS):
        commands.append(["config", "rm", "--path", f"{key}.canary"])
    return commands


def _pulumi(args: list[str], stack: str, cwd: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(["pulumi", *args, "--stack", stack], cwd=cwd, text=True,
                          capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--yes", action="store_true", help="pass --yes to pulumi up")
    parser.add_argument("--cwd", help="the project folder (default: the current one)")
    args = parser.parse_args(argv)
    got = _pulumi(["config", "get", "--path", f"{NAMESPACE}:vllmFleet", "--json"],
                  args.stack, args.cwd)
    if got.returncode != 0:
        print(f"rollback: the stack declares no vllmFleet:\n{got.stderr.strip()}", file=sys.stderr)
        return 2
    fleet = json.loads(got.stdout)
    fleet = json.loads(fleet["value"]) if isinstance(fleet, dict) and "value" in fleet else fleet
    try:
        commands = plan(fleet)
    except RollbackError as error:
        print(f"rollback: {error}", file=sys.stderr)
        return 2
    for command in commands:
        done = _pulumi(command, args.stack, args.cwd)
        if done.returncode != 0:
            print(f"rollback: pulumi {' '.join(command)} failed:\n{done.stderr.strip()}",
                  file=sys.stderr)
            return 1
    previous = fleet["previous"]
    print(f"rollback: stable is now {previous['tag']} revision {previous['revision'][:7]}; pulumi up",
          file=sys.stderr)
    return subprocess.run(["pulumi", "up", "--stack", args.stack, *(["--yes"] if args.yes else [])],
                          cwd=args.cwd).returncode


if __name__ == "__main__":
    sys.exit(main())
