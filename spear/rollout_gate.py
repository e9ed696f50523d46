"""The rollout gate (seed 001 step 8 and "How to maintain it"): a canary pair is promoted to
stable only on a passing gate run recorded for exactly that pair.

A run (`scripts/gate`, gate/run.py) talks to the live path and writes two files: the evidence,
one JSON line per request with its answer and timings, and the record, which names the
evidence's sha256 and says what the run found. Nothing in a record is believed: scripts/gate
(before it prints a verdict), the config check (before `pulumi up`) and the policy pack (on the
Deployments a preview shows) all call `judge`. Its `check_record` re-judges every answer in the
evidence with the same fail-closed validator and task checks, recomputes b, c, the exact McNemar
p-value and the latency percentiles, and refuses a record whose evidence is missing or altered,
whose numbers differ from the recomputed ones (naming the field), or that ran under another gate
policy. Nor is the evidence believed: with the key derived from the gateway's master key (the
gate and the config check hold it; the pack does not), `receipt_problems` refuses answers the
gateway did not sign (spear/receipts.py). A record that does not stand blocks only the
promotion it would allow (`refusals`): any other `up`, a rollback included, goes on without it.

The policy (alpha, floors, SLOs, sample sizes, concurrency) belongs to the stack and is fixed
before a run: a record carries its digest. The verdict is the cookbook's: no significant
regression of the candidate against stable in the paired eval, and every floor and SLO met, so
a neutral engine bump (b = c = 0) passes.

Pure and stdlib only: config/schema/vllm_fleet.py and policies/kubernetes/promotion_gate.py
call the same functions on the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from spear import fleet, receipts, tool_calls
from spear.mcnemar import p_value
from spear.probes import TOOL_REGISTRY

# "run hundreds": a gate on a handful of tool calls proves little about the parser.
MIN_TOOL_CALL_SAMPLES = 100
# Reported beside the SLO's 95th percentile, for whoever reads the table.
PERCENTILES = (50, 95, 99)

# Evidence line kinds.
RUN, TOOL_CALL, TASK, STREAM = "run", "tool-call", "task", "stream"
STABLE_TRACK, CANDIDATE_TRACK = "stable", "candidate"

# (engine version = image tag, model repository, model revision): what a rollout moves together.
Pair = tuple[str, str, str]


def pair_from_json(value: Mapping[str, Any] | None) -> Pair | None:
    """A pair as the fleet writes it ({tag, model, revision}: its rollout output and ConfigMap)."""
    return None if value is None else (value["tag"], value["model"], value["revision"])


def describe(pair: Pair) -> str:
    return f"{pair[0]} @ {pair[1]} revision {pair[2][:7]}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Policy:
    """The stack's gate, pre-registered: what a run measures and what it must meet."""
    alpha: float  # a regression is significant when b > c and the exact McNemar p < alpha
    candidate_pass_rate_min: float  # floor: share of the paired eval's tasks the candidate passes
    tool_call_pass_rate_min: float  # floor: share of live tool calls the validator admits
    tool_call_samples: int
    concurrency: int  # requests in flight, for the tool calls and the replayed trace
    ttft_p95_seconds: float
    itl_p95_seconds: float
    tasks_sha256: str  # the task set and the trace the run used, by content
    trace_sha256: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def digest(self) -> str:
        return sha256(json.dumps(self.to_json(), sort_keys=True).encode())


@dataclass(frozen=True)
class Pin:
    """The tuple that "the endpoint works" means from now on."""
    engine_version: str
    model: str
    revision: str
    gateway_version: str
    harness_versions: tuple[tuple[str, str], ...]  # (harness, version), sorted by harness
    tool_registry: str  # registry_digest() of the validator the run judged tool calls with

    @property
    def pair(self) -> Pair:
        return (self.engine_version, self.model, self.revision)

    def to_json(self) -> dict[str, Any]:
        return {"engineVersion": self.engine_version, "model": self.model,
                "revision": self.revision, "gatewayVersion": self.gateway_version,
                "harnessVersions": dict(self.harness_versions), "toolRegistry": self.tool_registry}


def _harness_versions(value: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(h), str(v)) for h, v in dict(value["harnessVersions"]).items()))


def pin_from_json(value: Mapping[str, Any]) -> Pin:
    return Pin(str(value["engineVersion"]), str(value["model"]), str(value["revision"]),
               str(value["gatewayVersion"]), _harness_versions(value), str(value["toolRegistry"]))


@dataclass(frozen=True)
class ServedWith:
    """The rest of the tuple a promoted pair serves developers with, as the stack declares it:
    the gateway's LiteLLM version (None: the stack has no gateway), every harness's version, and
    the tool registry the validator admits calls by. A promotion's record must have measured the
    pair with exactly these."""
    gateway_version: str | None
    harness_versions: tuple[tuple[str, str], ...]  # (harness, version), sorted by harness
    tool_registry: str

    def to_json(self) -> dict[str, Any]:
        return {"gatewayVersion": self.gateway_version,
                "harnessVersions": dict(self.harness_versions), "toolRegistry": self.tool_registry}


def served_with_from_json(value: Mapping[str, Any]) -> ServedWith:
    version = value["gatewayVersion"]
    return ServedWith(None if version is None else str(version), _harness_versions(value),
                      str(value["toolRegistry"]))


def moved_members(pin: Pin, served: ServedWith) -> list[str]:
    """Where a record's pin differs from what the pair will be served with, each member named
    as the record names it; [] when the record measured exactly that tuple."""
    moved = []
    if served.gateway_version is not None and pin.gateway_version != served.gateway_version:
        moved.append(f"pin.gatewayVersion: LiteLLM {pin.gateway_version}, where the stack's"
                     f" gateway runs {served.gateway_version}")
    pinned, declared = dict(pin.harness_versions), dict(served.harness_versions)
    for name in sorted(set(pinned) | set(declared)):
        if pinned.get(name) != declared.get(name):
            moved.append(f"pin.harnessVersions.{name}: {pinned.get(name) or 'none'}, where the"
                         f" stack pins {declared.get(name) or 'none'}")
    if pin.tool_registry != served.tool_registry:
        moved.append(f"pin.toolRegistry: {pin.tool_registry[:12]}, where the validator's registry"
                     f" (spear/probes.py TOOL_REGISTRY: {', '.join(sorted(TOOL_REGISTRY))}) is"
                     f" {served.tool_registry[:12]}")
    return moved


# --- the paired eval's task set -------------------------------------------------------------

@dataclass(frozen=True)
class Task:
    """One task: the messages sent, the registry tools offered, and a deterministic check of the
    answer: `tool-call` (exactly one admitted call of that name, with those arguments) or
    `answer` (the text `equals`, `contains` or matches `regex`, and no tool call)."""
    id: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[str, ...]
    check: Mapping[str, Any]


_ANSWER_CHECKS = ("equals", "contains", "regex")


def task_problem(value: Any) -> str | None:
    """Why one task-set line is not a task, or None."""
    if not isinstance(value, dict) or set(value) - {"id", "messages", "tools", "check"}:
        return "an object with id, messages, tools (optional) and check"
    if not isinstance(value.get("id"), str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", value["id"]):
        return "id: letters, digits, '.', '_', '-' (at most 64)"
    messages = value.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
            and isinstance(m.get("content"), str) for m in messages):
        return "messages: a list of {role: system|user|assistant, content: text}"
    tools = value.get("tools", [])
    if not isinstance(tools, list) or any(t not in TOOL_REGISTRY for t in tools):
        return f"tools: names from the tool registry ({', '.join(sorted(TOOL_REGISTRY))})"
    check = value.get("check")
    if not isinstance(check, dict):
        return "check: {tool-call: {name, arguments}} or {answer: {equals|contains|regex: text}}"
    if set(check) == {"tool-call"}:
        call = check["tool-call"]
        if not isinstance(call, dict) or call.get("name") not in tools \
                or not isinstance(call.get("arguments"), dict):
            return "check.tool-call: {name: one of the task's tools, arguments: {...}}"
    elif set(check) == {"answer"}:
        answer = check["answer"]
        if not isinstance(answer, dict) or len(answer) != 1 or next(iter(answer)) not in _ANSWER_CHECKS \
                or not isinstance(next(iter(answer.values())), str):
            return f"check.answer: one of {', '.join(_ANSWER_CHECKS)} with a text"
    else:
        return "check: {tool-call: {name, arguments}} or {answer: {equals|contains|regex: text}}"
    return None


def parse_tasks(data: bytes) -> tuple[tuple[Task, ...], list[str]]:
    """The task set (one JSON object per line; blank lines and `#` lines skipped) and, for each
    bad line, `line N: problem`."""
    tasks, problems, seen = [], [], set()
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            value = json.loads(line)
        except ValueError as error:
            problems.append(f"line {number}: not JSON ({error})")
            continue
        problem = task_problem(value)
        if problem is None and value["id"] in seen:
            problem = f"id {value['id']!r} is used twice"
        if problem:
            problems.append(f"line {number}: {problem}")
            continue
        seen.add(value["id"])
        tasks.append(Task(value["id"], tuple(value["messages"]), tuple(value.get("tools", [])),
                          value["check"]))
    if not tasks and not problems:
        problems.append("no tasks")
    return tuple(tasks), problems


def tool_definition(name: str) -> dict[str, Any]:
    """The OpenAI tool definition of a registry tool, as a request offers it."""
    spec = TOOL_REGISTRY[name]
    kinds = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
             dict: "object"}
    properties = {arg: {"type": kinds[kind]} for arg, kind in {**spec.required, **spec.optional}.items()}
    return {"type": "function", "function": {
        "name": name, "parameters": {"type": "object", "properties": properties,
                                     "required": sorted(spec.required)}}}


def registry_digest() -> str:
    """The tool registry by content: every tool's definition as a request offers it. A new tool,
    or a changed argument, is a new digest, which a record made before it does not pin."""
    return sha256(json.dumps([tool_definition(name) for name in sorted(TOOL_REGISTRY)],
                             sort_keys=True).encode())


def task_request(task: Task, model: str, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": list(task.messages), "max_tokens": max_tokens,
                            "temperature": 0}
    if task.tools:
        body["tools"] = [tool_definition(name) for name in task.tools]
    return body


def task_passes(task: Task, status: int, answer: Any) -> bool:
    """The task's deterministic check on one answer (an HTTP error fails it)."""
    if status != 200:
        return False
    verdict = tool_calls.validate(answer, TOOL_REGISTRY)
    if "tool-call" in task.check:
        want = task.check["tool-call"]
        return verdict.ok and len(verdict.calls) == 1 and verdict.calls[0].name == want["name"] \
            and dict(verdict.calls[0].arguments) == want["arguments"]
    if verdict.reason != tool_calls.NO_TOOL_CALL:  # an answer task is answered in text
        return False
    text = answer["choices"][0]["message"].get("content")
    if not isinstance(text, str):
        return False
    kind, expected = next(iter(task.check["answer"].items()))
    if kind == "equals":
        return text.strip() == expected
    if kind == "contains":
        return expected in text
    return re.search(expected, text) is not None


# --- results, recomputed from the evidence ----------------------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-th percentile (0 < q <= 100) of values (none: 0)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Results:
    tool_calls: Mapping[str, int]  # total, passed, and a count per validator reason
    paired_eval: Mapping[str, Any]  # tasks, stablePassed, candidatePassed, b, c, p
    # requests, failed, ttftP50..P99, itlP50..P99 (seconds, the client's), and the same as the
    # gateway measured them: gatewayTtftP50..P99, gatewayItlP50..P99
    latency: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"toolCalls": dict(self.tool_calls), "pairedEval": dict(self.paired_eval),
                "latency": dict(self.latency)}


def http_reason(status: int) -> str:
    return f"http-{status}"


def tool_call_reason(status: int, answer: Any) -> str:
    return tool_calls.validate(answer, TOOL_REGISTRY).reason if status == 200 else http_reason(status)


def results(lines: Sequence[Mapping[str, Any]], tasks: Sequence[Task]) -> tuple[Results, list[str]]:
    """What the evidence shows, judged afresh, and why the evidence itself is incomplete."""
    problems: list[str] = []
    reasons = Counter(tool_call_reason(int(line["status"]), line.get("answer"))
                      for line in lines if line["kind"] == TOOL_CALL)
    total = sum(reasons.values())
    calls = {"total": total, "passed": reasons.get(tool_calls.OK, 0),
             **{f"reason:{r}": n for r, n in sorted(reasons.items())}}

    by_id = {task.id: task for task in tasks}
    outcomes: dict[str, dict[str, bool]] = {task.id: {} for task in tasks}
    for line in lines:
        if line["kind"] != TASK:
            continue
        task, track = by_id.get(line["task"]), line["track"]
        if task is None or track in outcomes[task.id]:
            problems.append(f"task {line['task']!r} ({track}) is not in the task set or is answered twice")
            continue
        outcomes[task.id][track] = task_passes(task, int(line["status"]), line.get("answer"))
    missing = [t for t, seen in outcomes.items() if set(seen) != {STABLE_TRACK, CANDIDATE_TRACK}]
    if missing:
        problems.append(f"the paired eval lacks answers for tasks {', '.join(missing)}")
    both = [seen for seen in outcomes.values() if len(seen) == 2]
    b = sum(1 for seen in both if seen[STABLE_TRACK] and not seen[CANDIDATE_TRACK])
    c = sum(1 for seen in both if seen[CANDIDATE_TRACK] and not seen[STABLE_TRACK])
    paired = {"tasks": len(both), "stablePassed": sum(s[STABLE_TRACK] for s in both),
              "candidatePassed": sum(s[CANDIDATE_TRACK] for s in both), "b": b, "c": c,
              "p": p_value(b, c)}

    streams = [line for line in lines if line["kind"] == STREAM]
    served = [line for line in streams if int(line["status"]) == 200 and line["chunks"]]
    latency = {"requests": len(streams), "failed": len(streams) - len(served),
               **_percentiles("ttft", "itl", [line["chunks"] for line in served]),
               # beside the client's, as the gateway signed them (receipt_problems checks them)
               **_percentiles("gatewayTtft", "gatewayItl",
                              [(line.get("closing") or {}).get("chunks") or [] for line in served])}
    return Results(calls, paired, latency), problems


def _percentiles(ttft_name: str, itl_name: str,
                 streams: Sequence[Sequence[float]]) -> dict[str, float]:
    """The TTFT and inter-token latency percentiles of streams' chunk times, as `ttft_name`P50
    and so on."""
    ttft = [chunks[0] for chunks in streams if chunks]
    itl = [later - earlier for chunks in streams for earlier, later in zip(chunks, chunks[1:])]
    return {**{f"{ttft_name}P{q}": percentile(ttft, q) for q in PERCENTILES},
            **{f"{itl_name}P{q}": percentile(itl, q) for q in PERCENTILES}}


def failures(found: Results, policy: Policy) -> list[str]:
    """Why a run's results do not pass the policy's gate; [] when they pass."""
    reasons = []
    calls, paired, latency = found.tool_calls, found.paired_eval, found.latency
    if calls["total"] < policy.tool_call_samples:
        reasons.append(f"the tool-call validator ran on {calls['total']} live samples, fewer than"
                       f" the policy's {policy.tool_call_samples}")
    elif calls["passed"] < policy.tool_call_pass_rate_min * calls["total"]:
        refused = ", ".join(f"{k.split(':', 1)[1]} {n}" for k, n in calls.items()
                            if k.startswith("reason:") and k != f"reason:{tool_calls.OK}")
        reasons.append(f"the tool-call validator admitted {calls['passed']} of {calls['total']}"
                       f" live samples, below the floor {policy.tool_call_pass_rate_min:g}"
                       f" (refused: {refused})")
    b, c, p = paired["b"], paired["c"], paired["p"]
    if b > c and p < policy.alpha:
        reasons.append(f"the candidate regresses on the paired eval: b={b} tasks stable passes and"
                       f" it fails, c={c} the reverse, exact McNemar p={p:.4g} < alpha"
                       f" {policy.alpha:g}")
    if not paired["tasks"] or paired["candidatePassed"] < policy.candidate_pass_rate_min * paired["tasks"]:
        reasons.append(f"the candidate passed {paired['candidatePassed']} of {paired['tasks']} tasks,"
                       f" below the floor {policy.candidate_pass_rate_min:g}")
    if not latency["requests"] or latency["failed"]:
        reasons.append(f"{latency['failed']} of {latency['requests']} replayed streaming requests"
                       " failed or streamed nothing")
    if latency["ttftP95"] > policy.ttft_p95_seconds:
        reasons.append(f"TTFT p95 {latency['ttftP95']:.4g}s under replayed load exceeds the SLO"
                       f" {policy.ttft_p95_seconds:g}s")
    if latency["itlP95"] > policy.itl_p95_seconds:
        reasons.append(f"inter-token latency p95 {latency['itlP95']:.4g}s under replayed load"
                       f" exceeds the SLO {policy.itl_p95_seconds:g}s")
    return reasons


# --- records ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Record:
    """A gate run as checked: its pin, the results recomputed from its evidence, its verdict."""
    name: str
    pin: Pin
    results: Results
    failures: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.failures


def record_json(name: str, pin: Pin, policy: Policy, evidence: bytes, tasks: Sequence[Task],
                evidence_file: str) -> dict[str, Any]:
    """The record a run writes: what check_record will find in its evidence."""
    found, _ = results(evidence_lines(evidence), tasks)
    return {"name": name, "pin": pin.to_json(), "policy": policy.digest,
            "evidence": {"file": evidence_file, "sha256": sha256(evidence)},
            "results": found.to_json(), "failures": failures(found, policy)}


def evidence_lines(evidence: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in evidence.decode().splitlines() if line.strip()]


def evidence_bytes(lines: Sequence[Mapping[str, Any]]) -> bytes:
    """The evidence file of these lines (evidence_lines' inverse), as scripts/gate writes it."""
    return "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines).encode()


def _differences(prefix: str, written: Any, found: Any) -> list[str]:
    if isinstance(found, dict):
        if not isinstance(written, dict):
            return [f"{prefix}: {json.dumps(written)} where the evidence gives {json.dumps(found)}"]
        out = []
        for key in sorted(set(found) | set(written)):
            out += _differences(f"{prefix}.{key}", written.get(key), found.get(key))
        return out
    if isinstance(found, float) and isinstance(written, (int, float)) and not isinstance(written, bool) \
            and math.isclose(written, found, rel_tol=1e-9, abs_tol=1e-12):
        return []
    if written != found:
        return [f"{prefix}: {json.dumps(written)} where the evidence gives {json.dumps(found)}"]
    return []


def check_record(value: Any, evidence: bytes | None, tasks: Sequence[Task],
                 policy: Policy) -> tuple[Record | None, list[str]]:
    """The record `value` (as a run wrote it) checked against its evidence and the stack's policy:
    (the record, []) when it stands, else (None, every problem, each naming its field)."""
    if not isinstance(value, dict) or not {"name", "pin", "policy", "evidence", "results"} <= set(value):
        return None, ["not a record a gate run wrote (name, pin, policy, evidence, results)"]
    if evidence is None:
        return None, [f"evidence: its file {value['evidence'].get('file')!r} is missing"]
    problems = []
    if sha256(evidence) != value["evidence"].get("sha256"):
        problems.append(f"evidence.sha256: {value['evidence'].get('sha256')} is not the evidence"
                        f" file's ({sha256(evidence)}): it was altered after the run")
    if value["policy"] != policy.digest:
        problems.append(f"policy: the run's gate policy ({value['policy'][:12]}) is not the stack's"
                        f" ({policy.digest[:12]}): the policy changed after the run, so run it again")
    try:
        lines = evidence_lines(evidence)
        run = [line for line in lines if line.get("kind") == RUN]
        pin = pin_from_json(value["pin"])
        found, incomplete = results(lines, tasks)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
        return None, [*problems, f"evidence: not a gate run's evidence ({error!r})"]
    if len(run) != 1 or pin_from_json(run[0]["pin"]) != pin or run[0].get("policy") != value["policy"]:
        problems.append("pin: the evidence was measured on another pin or policy than the record says")
    problems += [f"evidence: {p}" for p in incomplete]
    problems += [f"results{d}" for d in _differences("", value["results"], found.to_json())]
    if problems:
        return None, problems
    return Record(str(value["name"]), pin, found, tuple(failures(found, policy))), []


@dataclass(frozen=True)
class Refused:
    """A record that does not stand: its name, the pair it claims (None when its pin does not
    read) and why, each problem naming its field."""
    name: str
    pair: Pair | None
    problems: tuple[str, ...]

    def reason(self) -> str:
        return (f"record {self.name} does not stand ({'; '.join(self.problems)}): run scripts/gate"
                f" again, or delete {self.name}.json and its evidence from the records folder")


def claimed_pair(value: Any) -> Pair | None:
    try:
        return pin_from_json(value["pin"]).pair
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def judge(name: str, value: Any, evidence: bytes | None, tasks: Sequence[Task], policy: Policy,
          receipt_key: bytes | None, *, receipts: bool = True) -> Record | Refused:
    """The one verdict on a record, which scripts/gate gives before it prints PASS, the config
    check before `pulumi up` and the policy pack at preview: `check_record`, then
    `receipt_problems` with the key derived from the gateway's master key (None: the stack has
    none, so no receipt can be checked and no record stands). The pack holds no secret and
    passes receipts=False: the config check, which runs first in the same preview, checked them."""
    record, problems = check_record(value, evidence, tasks, policy)
    if record is not None and evidence is not None and receipts:
        problems = ([f"evidence: {p}" for p in receipt_problems(evidence, tasks, receipt_key,
                                                                 record.pin)]
                    if receipt_key is not None else
                    ["evidence: its receipts cannot be checked: the stack declares no"
                     " gatewayMasterKey (the gateway that signed its answers)"])
    if record is None or problems:
        return Refused(name, claimed_pair(value), tuple(problems))
    return record


def _lines_named(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:5])
    return f"line{'s' if len(numbers) > 1 else ''} {shown}{', ...' if len(numbers) > 5 else ''}"


def receipt_problems(evidence: bytes, tasks: Sequence[Task], key: bytes, pin: Pin) -> list[str]:
    """Why the evidence's answers are not all the gateway's own (spear/receipts.py); [] when
    they are. Every served answer (HTTP 200) carries the receipt the gateway signed it with, for
    its request and its answer; each receipt is used once; a task's request is the task's; and
    each track's answers come from one key, route and deployment, not the other track's (a
    candidate's answer the hatch gave, or stable's answer copied to the candidate, does not
    count). The gateway signed the fleet track of the deployment that answered: stable's answers
    are the stable track's, the candidate's the canary's; the LiteLLM version that answered,
    which is the pin's; and, where it picked the pod itself, what that pod runs, which for the
    candidate is the pin's pair. A stream's header receipt covers its request; its closing receipt the
    text and when the gateway sent each chunk, which the client cannot have received sooner."""
    missing, forged, reused, not_the_task, unclosed, sooner = [], [], [], [], [], []
    calls: set[str] = set()
    identities: dict[str, set[tuple[str, ...]]] = {STABLE_TRACK: set(), CANDIDATE_TRACK: set()}
    tracks: dict[str, dict[str, list[int]]] = {STABLE_TRACK: {}, CANDIDATE_TRACK: {}}
    versions: dict[str, list[int]] = {}
    elsewhere: dict[str, list[int]] = {}  # what else than the pin's pair answered the candidate
    by_id = {task.id: task for task in tasks}
    for number, line in enumerate(evidence_lines(evidence), 1):
        kind = line.get("kind")
        if kind == RUN or int(line.get("status", 0)) != 200:
            continue  # an error answer counts against the candidate: nobody forges one
        try:
            receipt = receipts.receipt_from_json(line.get("receipt"))
        except ValueError:
            missing.append(number)
            continue
        messages = (line.get("request") or {}).get("messages")
        if not receipts.verifies(key, receipt, messages, None if kind == STREAM else line.get("answer")):
            forged.append(number)
        if receipt.call_id in calls:
            reused.append(number)
        calls.add(receipt.call_id)
        if kind == TASK and (line.get("task") not in by_id
                             or messages != list(by_id[line["task"]].messages)):
            not_the_task.append(number)
        if kind == STREAM:
            problem = _stream_problem(key, receipt, line)
            if problem == UNCLOSED:
                unclosed.append(number)
            elif problem:
                sooner.append(number)
        side = line.get("track") if kind == TASK else CANDIDATE_TRACK
        if side == CANDIDATE_TRACK and receipt.serves and receipt.serves != receipts.serving(*pin.pair):
            elsewhere.setdefault(receipt.serves, []).append(number)
        identities[side].add(receipt.identity)
        tracks[side].setdefault(receipt.track, []).append(number)
        versions.setdefault(receipt.gateway, []).append(number)
    problems = []
    if missing:
        problems.append(f"{len(missing)} served answers carry no receipt from the gateway"
                        f" ({_lines_named(missing)}): run scripts/gate through the stack's gateway")
    if forged:
        problems.append(f"{len(forged)} receipts do not sign their line's request and answer"
                        f" ({_lines_named(forged)}): the answers are not the ones the gateway gave,"
                        " or another gateway (another master key) signed them")
    if reused:
        problems.append(f"{len(reused)} receipts sign a call another line already used"
                        f" ({_lines_named(reused)})")
    if not_the_task:
        problems.append(f"{len(not_the_task)} task answers are to other requests than their"
                        f" task's ({_lines_named(not_the_task)})")
    if unclosed:
        problems.append(f"{len(unclosed)} streams carry no closing receipt of their text and"
                        f" timings from the gateway ({_lines_named(unclosed)})")
    if sooner:
        problems.append(f"{len(sooner)} streams' text or chunk times are not the ones the gateway"
                        f" signed, or say a chunk arrived before the gateway sent it"
                        f" ({_lines_named(sooner)})")
    for side, track in ((STABLE_TRACK, fleet.STABLE), (CANDIDATE_TRACK, fleet.CANARY)):
        for other, numbers in sorted(tracks[side].items()):
            if other != track:
                problems.append(f"{len(numbers)} of the {side}'s answers were served by"
                                f" {repr(other) if other else 'no'} fleet track, not {track!r}"
                                f" ({_lines_named(numbers)})")
    for serves, numbers in sorted(elsewhere.items()):
        problems.append(f"pin: the record pins {describe(pin.pair)}, but the gateway signed that"
                        f" a pod running {describe(tuple(serves.split(' ', 2)))} answered"
                        f" {len(numbers)} of the candidate's requests ({_lines_named(numbers)})")
    for version, numbers in sorted(versions.items()):
        if version != pin.gateway_version:
            problems.append(f"pin.gatewayVersion: the record pins LiteLLM {pin.gateway_version},"
                            f" but LiteLLM {version} answered {len(numbers)} requests"
                            f" ({_lines_named(numbers)})")
    for side, found in identities.items():
        if len(found) > 1:
            problems.append(f"the {side} track's answers come from more than one key, route or"
                            f" deployment: {', '.join('/'.join(i) for i in sorted(found))}")
    if identities[STABLE_TRACK] and identities[STABLE_TRACK] == identities[CANDIDATE_TRACK]:
        problems.append("stable and the candidate were answered by the same key, route and"
                        f" deployment ({'/'.join(next(iter(identities[STABLE_TRACK])))})")
    return problems


# A client's clock starts before it connects and the gateway's when the request arrives, so a
# chunk's client time is never below the gateway's; this much allows for the two clocks' reads.
CLOCK_SLACK_SECONDS = 0.005


UNCLOSED, DISAGREES = "unclosed", "disagrees"


def _stream_problem(key: bytes, receipt: receipts.Receipt, line: Mapping[str, Any]) -> str | None:
    """UNCLOSED when a stream has no closing receipt for its call, DISAGREES when its text or
    chunk times are not what the gateway signed, else None."""
    try:
        closing = receipts.stream_receipt_from_json(line.get("closing"))
    except ValueError:
        return UNCLOSED
    if closing.call_id != receipt.call_id:
        return UNCLOSED
    chunks = line.get("chunks") or []
    if not receipts.stream_verifies(key, closing, str(line.get("text", ""))) \
            or len(chunks) != len(closing.chunks) \
            or any(client + CLOCK_SLACK_SECONDS < sent for client, sent in zip(chunks, closing.chunks)):
        return DISAGREES
    return None


def refusals(pair: Pair, records: Sequence[Record], refused: Sequence[Refused] = (),
             served: ServedWith | None = None) -> list[str]:
    """Why `pair` may not serve as stable: [] when a record for exactly this pair, measured with
    exactly what it will be served with (`served`: LiteLLM's, the harnesses', the registry),
    passes. A record of the pair under another tuple says which member moved. The records that
    do not stand and claim this pair (or whose pin does not read) say why here, and only here:
    they block this promotion, nothing else."""
    matching = [r for r in records if r.pin.pair == pair]
    moved = {r.name: moved_members(r.pin, served) if served else [] for r in matching}
    if any(r.passed and not moved[r.name] for r in matching):
        return []
    broken = [r.reason() for r in refused if r.pair in (pair, None)]
    if not matching:
        return [f"no gate record pins exactly {describe(pair)}"
                + (f" (records pin {', '.join(describe(r.pin.pair) for r in records)})"
                   if records else "")] + broken
    reasons = []
    for r in matching:
        if moved[r.name]:
            reasons.append(f"record {r.name} measured the pair under another tuple"
                           f" ({'; '.join(moved[r.name])}): run scripts/gate again with what the"
                           " stack serves it with")
        else:
            reasons += [f"record {r.name}: {reason}" for reason in r.failures]
    return reasons + broken


def promotion_refusals(stable: Pair, previous: Pair | None, records: Sequence[Record],
                       deployed: tuple[Pair, Pair | None] | None = None,
                       refused: Sequence[Refused] = (),
                       served: ServedWith | None = None) -> list[str]:
    """Why this stable pair may not be deployed; [] when it may.

    `deployed` is (stable, previous) as the stack's last update left them (its own state, read
    back at preview), so editing or deleting the declared `previous` cannot pass for a rollback:
    keeping the deployed stable pair, or going back to the deployed previous one, needs no
    record; anything else is a promotion from the deployed stable pair, which must then be
    declared as `previous` (the rollback target) and needs a passing record. With nothing
    deployed yet, the declared pairs decide: the first stable pair of a fleet (no previous pair),
    or stable == previous, needs none. `served`: what the pair will be served with, which a
    promotion's record must have measured it with (`refusals`)."""
    if deployed is None:
        if previous is None or stable == previous:
            return []
        return refusals(stable, records, refused, served)
    deployed_stable, deployed_previous = deployed
    if stable == deployed_stable or stable == deployed_previous:
        return []
    reasons = []
    if previous != deployed_stable:
        reasons.append(f"stable moves off the deployed pair {describe(deployed_stable)}, so"
                       " previous must be that pair (declared: "
                       f"{describe(previous) if previous else 'none'})")
    return reasons + refusals(stable, records, refused, served)
