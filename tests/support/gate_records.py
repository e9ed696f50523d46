"""Gate records and evidence made in a test, for the checks that judge them (config, policy):
answers shaped as an OpenAI-compatible server gives them, chosen to pass or fail each task, each
with the receipt a gateway with the test stacks' master key would sign it with
(spear/receipts.py). A real run against llama-server is tests/integration/test_rollout_gate.py's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from collections.abc import Callable
from typing import Any

from gate import run as gate_run
from spear import receipts, rollout_gate, trace
from spear.fleet import CANARY, STABLE
from spear.harness import DEFAULT_VERSIONS, LOCKS
from spear.rules import CODER_MODEL, SMOKE_ANSWER
from tests.support.config_cases import MASTER_KEY

REPO = Path(__file__).resolve().parents[2]
TASKS = "gate/tasks/local.jsonl"
TRACE = "gate/traces/default.json"
RECORDS = "stacks/gate/test"
POLICY_CONFIG = {"alpha": 0.05, "candidatePassRateMin": 0.9, "toolCallPassRateMin": 1.0,
                 "toolCallSamples": 100, "concurrency": 4, "ttftP95Seconds": 1.5,
                 "itlP95Seconds": 0.06, "tasks": TASKS, "trace": TRACE}


def project(tmp: Path) -> Path:
    """A project folder with the repository's task set and trace, and the harnesses' locks (a
    stack's `harnesses` needs its version's), to chdir into."""
    shutil.copytree(REPO / "gate", tmp / "gate", dirs_exist_ok=True)
    shutil.copytree(REPO / LOCKS, tmp / LOCKS, dirs_exist_ok=True)
    return tmp


def policy(**changes: Any) -> rollout_gate.Policy:
    """POLICY_CONFIG (with changes) as the config check reads it, from the current folder."""
    given = {**POLICY_CONFIG, **changes}
    return rollout_gate.Policy(
        alpha=given["alpha"], candidate_pass_rate_min=given["candidatePassRateMin"],
        tool_call_pass_rate_min=given["toolCallPassRateMin"],
        tool_call_samples=given["toolCallSamples"], concurrency=given["concurrency"],
        ttft_p95_seconds=given["ttftP95Seconds"], itl_p95_seconds=given["itlP95Seconds"],
        tasks_sha256=rollout_gate.sha256(Path(given["tasks"]).read_bytes()),
        trace_sha256=rollout_gate.sha256(Path(given["trace"]).read_bytes()))


def tasks() -> tuple[rollout_gate.Task, ...]:
    return rollout_gate.parse_tasks(Path(TASKS).read_bytes())[0]


def pin(pair: dict[str, str], harnesses: dict[str, str] | None = None) -> rollout_gate.Pin:
    """The pair under what the test stacks serve it with: their gateway's LiteLLM, the harnesses
    at the defaults (or at `harnesses` where it says) and the tool registry."""
    return rollout_gate.Pin(pair["tag"], pair["model"], pair["revision"], LITELLM,
                            tuple(sorted({**DEFAULT_VERSIONS, **(harnesses or {})}.items())),
                            rollout_gate.registry_digest())


def text_answer(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}


def call_answer(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call-1", "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}]}}]}


MARKUP = text_answer('<tool_call>\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n</tool_call>')


def right_answer(task: rollout_gate.Task) -> dict[str, Any]:
    if "tool-call" in task.check:
        return call_answer(task.check["tool-call"]["name"], task.check["tool-call"]["arguments"])
    return text_answer(next(iter(task.check["answer"].values())))


# Who asks each side, and which deployment of which fleet track answers it, as the local stack's
# gateway signs them.
IDENTITIES = {rollout_gate.STABLE_TRACK: ("gate", "vllm-stable", STABLE),
              rollout_gate.CANDIDATE_TRACK: ("gate-pilot", "vllm-canary", CANARY)}
LITELLM = "1.91.1"  # the version pin() pins, and the signing gateway's


def signed(line: dict[str, Any], side: str, call_id: str, master_key: str | None,
           identity: tuple[str, str, str] | None = None, litellm: str = LITELLM,
           serves: str = "") -> dict[str, Any]:
    """The line with the receipt a gateway holding `master_key` (None: none) and running
    `litellm` gives its answer, from `identity` (who, deployment, track; default: the side's)
    and a pod running `serves` ("": the Service picked), and a stream's closing receipt of its
    text and the times its chunks were sent."""
    if master_key is None:
        return line
    who, served_by, track = identity or IDENTITIES[side]
    key = receipts.receipt_key(master_key)
    stream = line["kind"] == rollout_gate.STREAM
    receipt = receipts.sign(key, call_id, who, CODER_MODEL, served_by, track, serves, litellm,
                            line["request"]["messages"], None if stream else line["answer"])
    line = {**line, "receipt": receipt.to_json()}
    if stream:  # the gateway sent each chunk a little before the client read it
        sent = [round(max(0.0, c - 0.001), 6) for c in line["chunks"]]
        line["closing"] = receipts.sign_stream(key, call_id, sent, line["text"]).to_json()
    return line


def evidence(pair: dict[str, str], gate: rollout_gate.Policy, *, samples: int | None = None,
             markup_calls: int = 0, candidate_fails: int = 0, stable_fails: int = 0,
             ttft: float = 0.05, itl: float = 0.01, master_key: str | None = MASTER_KEY,
             harnesses: dict[str, str] | None = None) -> bytes:
    """A run's evidence under pin(pair, harnesses): `samples` tool calls (the last
    `markup_calls` answered as text), every task (the candidate failing the first
    `candidate_fails`, stable the last `stable_fails`), the default trace streamed with a
    constant TTFT and ITL; each answer signed by a gateway holding `master_key`."""
    samples = gate.tool_call_samples if samples is None else samples
    candidate = rollout_gate.CANDIDATE_TRACK
    # The canary's pods run the pair, as a gateway that picks the pods signs it.
    serves = {candidate: receipts.serving(*pin(pair).pair)}
    answered: list[tuple[dict[str, Any], str]] = []  # (line, track)
    for i, body in enumerate(gate_run.tool_call_bodies(CODER_MODEL, samples)):
        answer = MARKUP if i >= samples - markup_calls else call_answer("read_file", {"path": "src/app.py"})
        answered.append(({"kind": rollout_gate.TOOL_CALL, "request": body, "status": 200,
                          "answer": answer}, candidate))
    task_list = tasks()
    for i, task in enumerate(task_list):
        for track, fails in ((rollout_gate.STABLE_TRACK, i >= len(task_list) - stable_fails),
                             (candidate, i < candidate_fails)):
            answered.append(({"kind": rollout_gate.TASK, "task": task.id, "track": track,
                              "request": rollout_gate.task_request(task, CODER_MODEL, gate_run.MAX_TOKENS),
                              "status": 200,
                              "answer": text_answer("no") if fails else right_answer(task)}, track))
    for arrival in trace.parse(json.loads(Path(TRACE).read_text())):
        chunks = [round(ttft + n * itl, 6) for n in range(5)]
        answered.append(({"kind": rollout_gate.STREAM, "offset": arrival.offset,
                          "sent": arrival.offset, "request": gate_run.trace_body(CODER_MODEL, arrival),
                          "status": 200, "chunks": chunks, "text": SMOKE_ANSWER}, candidate))
    lines = [{"kind": rollout_gate.RUN, "pin": pin(pair, harnesses).to_json(), "policy": gate.digest,
              "stable": "coder as gate", "candidate": "coder as gate-pilot"},
             *(signed(line, track, f"call-{n}", master_key, serves=serves.get(track, ""))
               for n, (line, track) in enumerate(answered))]
    return rollout_gate.evidence_bytes(lines)


def write_record(name: str, pair: dict[str, str], gate: rollout_gate.Policy | None = None,
                 folder: str = RECORDS, harnesses: dict[str, str] | None = None,
                 **run: Any) -> Path:
    """A record and its evidence written as scripts/gate writes them (pinning `harnesses`
    where it says, else the defaults); the record's path."""
    gate = gate or policy()
    gate_run.write(Path(folder), name, pin(pair, harnesses), gate,
                   evidence(pair, gate, harnesses=harnesses, **run), tasks())
    return Path(folder) / f"{name}.json"


def table(record: dict[str, Any], gate: rollout_gate.Policy, folder: str = RECORDS) -> str:
    """The verdict table scripts/gate prints for a written record: the stack's own verdict
    (rollout_gate.judge, with the test stacks' master key)."""
    evidence = (Path(folder) / record["evidence"]["file"]).read_bytes()
    return gate_run.table(record, gate, rollout_gate.judge(
        record["name"], record, evidence, tasks(), gate, receipts.receipt_key(MASTER_KEY)))


def gate_config(folder: str = RECORDS, **changes: Any) -> dict[str, Any]:
    return {"policy": {**POLICY_CONFIG, **changes}, "records": folder}


def run_gate(stable: gate_run.Track, candidate: gate_run.Track, name: str, pair: dict[str, str],
             folder: str = RECORDS, log: Callable[[str], None] = lambda _: None,
             **policy_changes: Any) -> dict[str, Any]:
    """A real gate run (gate/run.py) under policy(**policy_changes), pinning `pair` and the
    LiteLLM version the gateway reports, telling `log` each step as it starts; its record,
    written into `folder`."""
    gate = policy(**policy_changes)
    task_list = tasks()
    version = candidate.endpoint.gateway_version()
    assert version, "the gateway did not report its LiteLLM version"
    the_pin = rollout_gate.Pin(*pin(pair).pair, version, pin(pair).harness_versions,
                               pin(pair).tool_registry)
    arrivals = trace.parse(json.loads(Path(policy_changes.get("trace", TRACE)).read_text()))
    evidence = gate_run.run(stable, candidate, gate, the_pin, task_list, arrivals, log)
    return gate_run.write(Path(folder), name, the_pin, gate, evidence, task_list)
