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


def test_the_answer_is_claude_codes_result_openhands_message_text_or_the_line_itself():
    result = {"type": "result", "stop_reason": "end_turn", "result": "SPEAR-BACKEND-OK"}
    assert seat.answer_text(json.dumps(result)) == "SPEAR-BACKEND-OK"
    event = {"source": "agent", "kind": "MessageEvent",
             "llm_message": {"content": [{"type": "text", "text": "SPEAR-BACKEND-OK"}]}}
    assert seat.answer_text(json.dumps(event)) == "SPEAR-BACKEND-OK"
    assert seat.answer_text("It prints 42.") == "It prints 42."
    # OpenHands may end its turn with its finish tool instead of a message.
    finish = {"source": "agent", "kind": "ActionEvent",
              "action": {"message": "It prints 42.", "kind": "FinishAction"}}
    assert seat.answer_text(json.dumps(finish)) == "It prints 42."
    assert len(seat.answer_text("x" * 500)) == seat.ANSWER_CHARS


def test_an_edit_turn_changes_a_file_of_the_demo_repository_and_prints_gits_diff():
    seats = {**SEATS, "cyn": {"developer": "cyn", "harness": "claude-code", "namespace": "agents",
                              "version": "2.1.328", "start": "kubectl ... -- claude"}}
    script = seat.command(seats, "cyn", "/k/config", "kubectl", edit="hello.py")[-1]
    assert script.startswith(seat.DEMO_SETUP + " && rm -f hello.py && ")
    assert shlex.join([*harness.EDIT_TURN["claude-code"],
                       "Create /workspace/demo/hello.py that prints a greeting."]) in script
    assert script.endswith("git add -N hello.py && git --no-pager diff")
    # Only a harness whose edits are applied without asking; only a file of the repository.
    with pytest.raises(seat.SeatError, match="--edit: seat 'ana' runs qwen-code; allowed: a seat"
                                             " whose harness is claude-code"):
        seat.command(seats, "ana", "/k/config", "kubectl", edit="hello.py")
    for name in ("../etc/passwd", "/etc/passwd", ".git", "a b"):
        with pytest.raises(seat.SeatError, match="allowed: a file name"):
            seat.command(seats, "cyn", "/k/config", "kubectl", edit=name)


def test_the_demo_repository_is_made_once_and_a_new_file_shows_in_gits_diff(tmp_path):
    # The seat's script run here, with `sh` standing in for the harness's write.
    setup = seat.DEMO_SETUP.replace(seat.DEMO_REPO, str(tmp_path / "demo"))
    for _ in range(2):
        done = subprocess.run(["sh", "-c", setup + " && echo 'print(1)' > hello.py && git add -N"
                               " hello.py && git --no-pager diff"], capture_output=True, text=True,
                              check=True)
        assert "+print(1)" in done.stdout and "new file" in done.stdout
        subprocess.run(["rm", str(tmp_path / "demo" / "hello.py")], check=True)
    log = subprocess.run(["git", "-C", str(tmp_path / "demo"), "log", "--oneline"],
                         capture_output=True, text=True, check=True).stdout
    assert len(log.splitlines()) == 1
