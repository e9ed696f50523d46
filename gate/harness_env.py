"""scripts/harness-env: one developer's wiring for one coding harness (spear/harness.py), read
from the stack's secret `harnesses` output with pulumi, printed as eval-able exports; `--write`
also writes the harness's config file and, for a gateway with a private root, that root."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spear.harness import HARNESSES, shell_exports

REPO = Path(__file__).resolve().parents[1]
STACK_OUTPUT = ["pulumi", "stack", "output", "harnesses", "--show-secrets", "--json"]


class HarnessError(Exception):
    """Bad input (exit 2) or an output that cannot be read (exit 1), said in one line."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def choose(harnesses: Mapping[str, Any], developer: str, harness: str) -> dict[str, Any]:
    """One developer's entry for one harness, or a HarnessError naming what is allowed."""
    if developer not in harnesses:
        raise HarnessError(f"developer {developer!r} has no key in this stack; allowed: "
                           + (", ".join(sorted(harnesses)) or "none (the stack declares no"
                              " developers)"))
    if harness not in HARNESSES:
        raise HarnessError(f"harness {harness!r} is not wired; allowed: {', '.join(HARNESSES)}")
    return harnesses[developer][harness]


def for_this_user(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry with `~/` in its variables expanded: the stack names the gateway's root at a
    path under the developer's home, which it does not know, and no harness expands `~`."""
    env = {name: os.path.expanduser(value) if value.startswith("~/") else value
           for name, value in entry["env"].items()}
    return {**entry, "env": env}


def files(entry: Mapping[str, Any]) -> list[Mapping[str, str]]:
    """The files the harness needs: its config file, the gateway's root certificate."""
    return [entry[kind] for kind in ("file", "ca") if entry.get(kind)]


def instructions(entry: Mapping[str, Any], written: list[str] | None = None) -> str:
    """What the command prints: eval-able exports, then the rest as shell comments (for each
    file, where it goes and its content, or that it was written; how to install the stack's
    version of the harness and run it)."""
    lines = [shell_exports(for_this_user(entry)).rstrip("\n")]
    if written:
        lines += [f"# wrote {path}" for path in written]
    else:
        for file in files(entry):
            lines.append(f"# {file['path']} (write it with --write), with this content:")
            lines += [f"#   {line}" if line else "#" for line in file["content"].splitlines()]
    lines.append(f"# install it: {entry['install']}")
    lines.append(f"# then run: {entry['run']}")
    return "\n".join(lines) + "\n"


def write_file(file: Mapping[str, str]) -> str:
    """Writes the harness's config file (atomically); refuses to replace one with other content."""
    path = Path(os.path.expanduser(file["path"]))
    if path.exists() and path.read_text() != file["content"]:
        raise HarnessError(f"{path} exists with other content; move it aside or merge in the"
                           " lines printed without --write")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, prefix=".spear-") as tmp:
        tmp.write(file["content"])
    os.replace(tmp.name, path)
    return str(path)


def _stack_output(stack: str | None) -> str:
    command = [*STACK_OUTPUT, *(["--stack", stack] if stack else [])]
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    except FileNotFoundError:
        raise HarnessError("pulumi is not on PATH: run `source scripts/env.sh` first", 1)
    if done.returncode != 0:
        raise HarnessError(f"`{shlex.join(command)}` failed: {done.stderr.strip()[-500:]}", 1)
    return done.stdout


def main(argv: list[str] | None = None,
         stack_output: Callable[[str | None], str] = _stack_output) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/harness-env",
        description="Print one developer's wiring for one coding harness: eval-able exports"
                    ' (eval "$(scripts/harness-env ana qwen-code)").')
    parser.add_argument("developer")
    parser.add_argument("harness", help="one of " + ", ".join(HARNESSES))
    parser.add_argument("--stack", help="the stack (default: the selected one)")
    parser.add_argument("--write", action="store_true",
                        help="write the harness's config file too (Codex: ~/.codex/config.toml,"
                             " Qwen-Code: ~/.qwen/settings.json) and the gateway's root"
                             " certificate when it has a private one")
    parser.add_argument("--outputs-json", metavar="FILE",
                        help="the output of `pulumi stack output harnesses --show-secrets --json`"
                             " (default: run it)")
    args = parser.parse_args(argv)
    try:
        text = (Path(args.outputs_json).read_text() if args.outputs_json
                else stack_output(args.stack))
        try:
            harnesses = json.loads(text)
        except ValueError:
            raise HarnessError("the stack's harnesses output is not JSON (is the gateway up?)", 1)
        entry = choose(harnesses, args.developer, args.harness)
        written = [write_file(file) for file in files(entry)] if args.write else None
    except HarnessError as error:
        print(f"harness-env: {error}", file=sys.stderr)
        return error.code
    sys.stdout.write(instructions(entry, written))
    return 0
