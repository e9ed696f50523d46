"""scripts/seat: open a developer's agent seat, or prove it with one turn of its harness.

`scripts/seat --stack local ana` starts the seat's harness in its pod (the stack's `seats`
output says how: `kubectl exec -it` into the seat's Deployment, the harness wired to the gateway
by name over TLS with the developer's key). `--turn` runs one non-interactive turn instead, the
one each harness's dialect check runs (spear/harness.py ONE_TURN, on a file it writes in the
working copy), and prints the harness's answer: what up-local shows as each seat's proof.
`--edit FILE` asks the harness, its edits accepted (spear/harness.py EDIT_TURN), to create FILE
in a small git repository of the working copy (`demo`, made on first use) and prints git's diff:
the cookbook's end state, a prompt in, a working diff out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from spear.harness import ANSWER_LINES, EDIT_TURN, ONE_TURN

# The working copy's throwaway file the turn reads (the dialect check's too).
TURN_SETUP = "mkdir -p src && echo 'print(42)' > src/app.py"
# The repository an edit turn changes, in the working copy (the seat's workspace).
DEMO_REPO = "/workspace/demo"
ANSWER_CHARS = 120  # a proof is one line
FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
# Made once, with one commit; the file asked for is removed first, so every edit turn is a diff.
DEMO_SETUP = (f"mkdir -p {DEMO_REPO} && cd {DEMO_REPO} && {{ [ -d .git ] || {{ git init -q &&"
              " git config user.email seat@spear-fleet.invalid && git config user.name seat &&"
              " echo '# demo' > README.md && git add README.md && git commit -qm init; }; }")


class SeatError(Exception):
    """Bad input (exit 2) or a seat that cannot be reached (exit 1), said in one line."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _pulumi(stack: str, *args: str) -> Any:
    done = subprocess.run(["pulumi", *args, "--stack", stack, "--json"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SeatError(f"pulumi {' '.join(args)} --stack {stack}: {done.stderr.strip()}", 1)
    return json.loads(done.stdout or "null")


def kubeconfig(fleet: Mapping[str, Any] | None, environ: Mapping[str, str]) -> str:
    """KUBECONFIG when set, else the file vllmFleet.kubeconfig names (a stack that holds its
    kubeconfig as a secret has no file to name: its operators set KUBECONFIG)."""
    if environ.get("KUBECONFIG"):
        return environ["KUBECONFIG"]
    path = (fleet or {}).get("kubeconfig")
    if isinstance(path, str):
        return os.path.expanduser(path)
    raise SeatError("the stack's vllmFleet.kubeconfig is not a file: set KUBECONFIG to the"
                    " fleet's cluster")


def edit_prompt(path: str) -> str:
    """What an edit turn asks (the local fleet's stand-in is scripted for exactly this task:
    localhosts/images/serving_image/vllm_standin.py)."""
    return f"Create {path} that prints a greeting."


def command(seats: Mapping[str, Any], name: str, config: str, kubectl: str,
            turn: bool = False, edit: str | None = None) -> list[str]:
    """The kubectl command that opens seat `name`, runs one turn in it, or one edit turn."""
    if name not in seats:
        raise SeatError(f"seat {name!r} is not declared in this stack; allowed: "
                        + (", ".join(sorted(seats)) or "none (vllmFleet.agentSandbox.seats)"))
    seat = seats[name]
    base = [kubectl, "--kubeconfig", config, "-n", seat["namespace"], "exec"]
    where = [f"deploy/seat-{name}", "-c", "harness", "--"]
    if edit is not None:
        if seat["harness"] not in EDIT_TURN:
            raise SeatError(f"--edit: seat {name!r} runs {seat['harness']}; allowed: a seat whose"
                            f" harness is {', '.join(EDIT_TURN)} (its edits applied without asking)")
        if not FILE_NAME.fullmatch(edit):
            raise SeatError(f"--edit: {edit!r}; allowed: a file name (letters, digits, '._-', not"
                            " starting with '.') in the demo repository")
        path = f"{DEMO_REPO}/{edit}"
        script = (f"{DEMO_SETUP} && rm -f {shlex.quote(edit)} && "
                  f"{shlex.join([*EDIT_TURN[seat['harness']], edit_prompt(path)])} >/dev/null &&"
                  f" git add -N {shlex.quote(edit)} && git --no-pager diff")
        return [*base, *where, "sh", "-c", script]
    if not turn:
        started = shlex.split(seat["start"])
        return [*base, "-it", *where, *started[started.index("--") + 1:]]
    select = ANSWER_LINES.get(seat["harness"])
    script = f"{TURN_SETUP} && {shlex.join(ONE_TURN[seat['harness']])}" + (
        f" | grep -E -e {shlex.quote(select)}" if select else "")
    return [*base, *where, "sh", "-c", script]


def answer_text(line: str) -> str:
    """The answer in a harness's last line, at most ANSWER_CHARS: Claude Code's JSON result
    carries it as `result`, OpenHands' JSON event as its message's text or its finish action's
    message; the others print it as it is."""
    try:
        event = json.loads(line)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        return line[:ANSWER_CHARS]
    if isinstance(event.get("result"), str):
        return event["result"][:ANSWER_CHARS]
    content = (event.get("llm_message") or {}).get("content")
    texts = [part.get("text", "") for part in content or [] if isinstance(part, dict)]
    finished = (event.get("action") or {}).get("message")
    return (" ".join(t for t in texts if t) or finished or line)[:ANSWER_CHARS]


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ) -> int:
    parser = argparse.ArgumentParser(prog="scripts/seat", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("seat", help="a seat the stack declares (vllmFleet.agentSandbox.seats)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--turn", action="store_true",
                      help="run one turn of the harness and print its answer, instead of opening it")
    mode.add_argument("--edit", metavar="FILE",
                      help=f"ask the harness to create FILE in {DEMO_REPO} (a git repository) and"
                           " print git's diff")
    args = parser.parse_args(argv)
    try:
        seats = _pulumi(args.stack, "stack", "output", "seats") or {}
        gateway = _pulumi(args.stack, "stack", "output", "gateway") or {}
        fleet = json.loads(_pulumi(args.stack, "config", "get", "vllmFleet")["value"])
        argv_ = command(seats, args.seat, kubeconfig(fleet, environ),
                        environ.get("KUBECTL", "kubectl"), args.turn, args.edit)
    except SeatError as error:
        print(f"scripts/seat: {error}", file=sys.stderr)
        return error.code
    if not (args.turn or args.edit):
        os.execvp(argv_[0], argv_)
    done = subprocess.run(argv_, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr, end="")
        return 1
    seat = seats[args.seat]
    if args.edit:
        print(f"seat {args.seat}: {seat['harness']} {seat['version']} changed {DEMO_REPO} with"
              f" {seat['developer']}'s key through {gateway.get('url', 'the gateway')}:")
        print(done.stdout, end="")
        return 0 if done.stdout.strip() else 1
    answer = done.stdout.strip().splitlines()
    # Quoted as it is, on one line (a repr would switch quotes on an apostrophe).
    said = " ".join(answer_text(answer[-1]).split()) if answer else "(nothing)"
    print(f"seat {args.seat}: {seat['harness']} {seat['version']} answered '{said}' with"
          f" {seat['developer']}'s key through {gateway.get('url', 'the gateway')}")
    return 0 if answer else 1


if __name__ == "__main__":
    sys.exit(main())
