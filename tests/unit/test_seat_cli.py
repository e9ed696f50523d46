"""scripts/seat (gate/seat.py) opens a seat or runs one turn in it, from the stack's `seats`
output (components/agent_seats) and its fleet's kubeconfig."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from gate import seat
from spear import harness

SEATS = {
    "ana": {"developer": "ana", "harness": "qwen-code", "namespace": "agents", "version": "0.24.4",
            "start": "kubectl -n agents exec -it deploy/seat-ana -c harness -- qwen"},
    "bob": {"developer": "bob", "harness": "openhands", "namespace": "agents", "version": "1.16.0",
            "start": "kubectl -n agents exec -it deploy/seat-bob -c harness -- openhands"
                     " --override-with-envs"},
}


def test_opening_a_seat_is_the_stacks_start_command_on_the_fleets_cluster():
    assert seat.command(SEATS, "bob", "/k/config", "kubectl", turn=False) == [
        "kubectl", "--kubeconfig", "/k/config", "-n", "agents", "exec", "-it", "deploy/seat-bob",
        "-c", "harness", "--", "openhands", "--override-with-envs"]


def test_a_turn_writes_the_file_it_asks_about_and_runs_the_dialect_checks_turn_without_a_tty(
        tmp_path):
    argv = seat.command(SEATS, "bob", "/k/config", "/opt/kubectl", turn=True)
    assert argv[:9] == ["/opt/kubectl", "--kubeconfig", "/k/config", "-n", "agents", "exec",
                        "deploy/seat-bob", "-c", "harness"]
    assert "-it" not in argv
    script = argv[-1]
    assert script.startswith(seat.TURN_SETUP + " && " + shlex.join(harness.ONE_TURN["openhands"]))
    # OpenHands prints events: the answer is the agent's message.
    assert shlex.quote(harness.ANSWER_LINES["openhands"]) in script
    # The turn really runs in a shell: what it writes, the harness reads.
    done = subprocess.run(["sh", "-c", seat.TURN_SETUP + " && cat src/app.py"], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    assert done.stdout == "print(42)\n"


def test_an_undeclared_seat_is_refused_naming_the_declared_ones():
    with pytest.raises(seat.SeatError, match="seat 'cyn' is not declared in this stack; allowed:"
                                             " ana, bob"):
        seat.command(SEATS, "cyn", "/k/config", "kubectl", turn=False)


def test_kubeconfig_is_the_environments_else_the_file_the_stack_names():
    assert seat.kubeconfig({"kubeconfig": "~/k"}, {"KUBECONFIG": "/etc/k"}) == "/etc/k"
    assert seat.kubeconfig({"kubeconfig": "/srv/k"}, {}) == "/srv/k"
    with pytest.raises(seat.SeatError, match="set KUBECONFIG"):
        seat.kubeconfig({"kubeconfig": {"secret": True}}, {})


def test_the_answer_is_openhands_message_text_or_the_line_itself():
    event = {"source": "agent", "kind": "MessageEvent",
             "llm_message": {"content": [{"type": "text", "text": "SPEAR-BACKEND-OK"}]}}
    assert seat.answer_text(json.dumps(event)) == "SPEAR-BACKEND-OK"
    assert seat.answer_text("It prints 42.") == "It prints 42."
