"""`vllmFleet` and `kubeconfig`: the vLLM fleet on Kubernetes (seed 001 steps 2-3, 7-8, "How to
run it in production", "How to maintain it").

The fleet serves one `stable` (image tag, model revision) pair, optionally a `canary` pair
beside it behind a Service of its own (the gateway routes only the pilot ring there), and keeps the `previous` stable pair declared so that a
rollback is one `pulumi up`. A promotion (stable moved off the previous pair) is refused here,
before anything is registered, unless `rolloutGate` records a passing gate result for exactly
the new pair (spear/rollout_gate.py; the policy pack checks the same on the preview). vLLM's
API key is the stack's `vllmApiKey` secret (config/schema/runpod.py reads it).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from config.checker import MISSING, NAME, Checker, ip_address, relative_subdir, show
from config.options import (BOOL, SECRET, Choice, Int, Moved, Named, Number, Obj, Opt,
                            ProjectFile, Tagged, Text, Typed, build, declared, pattern)
from config.types import (AMBIENT, PROMETHEUS_KEYS, AgentSandbox, Alerts, Canary, EgressTarget,
                          Kubeconfig, NodeGuard, Prometheus, RolloutGate, Seat, ServingPair, Vllm,
                          VllmFleet)
from spear import rollout_gate, trace
from spear.fleet import CANARY, STABLE
from spear.seats import DIALECT_CHECK_PREFIX, IMAGE_DIGEST_TEXT
from spear.vllm import (GPU_MEMORY_UTILIZATION, TOOL_CALL_PARSER, TOOL_CALL_PARSERS,
                        memory_floor_problem, tool_parser_problem)

SECRET_FORM = "secret"  # vllmFleet.kubeconfig: the text of the stack's `kubeconfig` secret
# A seat's name prefixes its Kubernetes objects (seat-<name>, seat-<name>-key) and labels them:
# a DNS-1123 label once prefixed, so letters, digits and inner '-' only.
_SEAT_NAME = re.compile(r"[a-z]([a-z0-9-]{0,29}[a-z0-9])?")


def _kubeconfig_form(value: str) -> str | None:
    if value in (AMBIENT, SECRET_FORM):
        return value
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) and "\n" not in path else None


SANDBOX = declared(
    AgentSandbox,
    gateway=Opt(Moved("the sandbox's way to the gateway is taken from `gateway` (its pods when it"
                      " runs in the cluster, its listen address on a host); remove it"), "",
                default=None),
    mirrors=Opt(Named(declared(EgressTarget), "a package mirror", non_empty=False),
                "package mirrors seats may reach", default={}),
    seats=Opt(Named(declared(Seat), "a seat", non_empty=False, name=_SEAT_NAME,
                    name_text="a seat name of lowercase letters, digits and inner '-', starting"
                    " with a letter (at most 31; it names the seat's Kubernetes objects)",
                    map_text="a map of seat name -> {developer, harness, workspaceSize}"),
              "agent seats, by name", default={}),
    nodeGuard=Opt(Typed(NodeGuard), "what keeps seats off their node (required with seats)",
                  default=None))
_PROMETHEUS = declared(Prometheus)
PROMETHEUS = Tagged("mode", {mode: Obj({
    **{key: _PROMETHEUS.fields[key] for key in ("mode", "scrapeIntervalSeconds", *keys)},
    # bundled runs the image the stack names.
    **({"image": Opt(_PROMETHEUS.fields["image"].kind, "the server's image, pinned")}
       if "image" in keys else {})}) for mode, keys in PROMETHEUS_KEYS.items()})
# The hatch's keys moved to its one block: said where they went, not just "unknown".
_MOVED_HATCH = ("the hatch is declared once, its gateway.hatch.{} drives the gateway's cap, the"
                " spend alert rule and the provider-side limit")
OBSERVABILITY = declared(
    Alerts,
    hatchCapUsd=Opt(Moved(_MOVED_HATCH.format("monthlyCapUsd")), "", default=None),
    hatchSpendAlertUsd=Opt(Moved(_MOVED_HATCH.format("alertUsd")), "", default=None),
    prometheus=Opt(PROMETHEUS, "none, bundled or operator", default=None))
_SECONDS = Number(0, lo_open=True)
_SHARE = Number(0, 1)
POLICY = Obj({
    "alpha": Opt(Number(0, 0.5, lo_open=True), "McNemar's significance level", default=0.05),
    "candidatePassRateMin": Opt(_SHARE, "the candidate's least pass rate", default=0.9),
    "toolCallPassRateMin": Opt(_SHARE, "the least share of valid tool calls", default=1.0),
    "toolCallSamples": Opt(Int(rollout_gate.MIN_TOOL_CALL_SAMPLES), "tool calls sampled",
                           default=200),
    "concurrency": Opt(Int(1, 256), "requests in flight", default=4),
    "ttftP95Seconds": Opt(_SECONDS, "the candidate's time to first token, p95", default=2.0),
    "itlP95Seconds": Opt(_SECONDS, "the candidate's inter-token latency, p95", default=0.1),
    "tasks": Opt(ProjectFile("the paired eval's task set (JSON lines, spear/rollout_gate.py)"),
                 "the paired eval's task set"),
    "trace": Opt(ProjectFile("the latency step's replay trace (spear/trace.py)"),
                 "the latency step's replay trace"),
})
_GATE_KEY = Opt(pattern(NAME, "a developer of the stack (its key is the gate's)"),
                "the developer whose key scripts/gate sends with", default=None)
GATE = Obj({
    "policy": Opt(POLICY, "the gate's thresholds and its task set"),
    "records": Opt(ProjectFile("the folder, inside the project, that scripts/gate writes records"
                               " into", folder=True), "the records folder"),
    "keys": Opt(Obj({STABLE: _GATE_KEY, CANARY: _GATE_KEY}), "stable's (general ring) and the"
                " canary's (pilot ring)", default={}),
})
_IP = Text(ip_address, "an IP address in the cluster's service range")
# The serve settings the fleet's pairs share, declared as a pod's (the model and revision are
# each pair's).
_VLLM = declared(Vllm).fields
FLEET = declared(
    VllmFleet,
    kubeconfig=Opt(Text(_kubeconfig_form, f"{AMBIENT} ($KUBECONFIG or ~/.kube/config of whoever"
                        f" runs pulumi), {SECRET_FORM} (the stack's `kubeconfig` secret) or the"
                        " absolute path of a kubeconfig file"),
                   "where the provider finds the cluster", default=AMBIENT),
    context=Opt(pattern(re.compile(r"[A-Za-z0-9][A-Za-z0-9@._:/-]*"), "a kubeconfig context"
                        " name"), "the kubeconfig's context (left out: its current)",
                default=None),
    canary=Opt(Obj({**declared(ServingPair).fields,
                    "replicas": Opt(Int(1), "its replicas", default=1)}),
               "a candidate pair the pilot ring is served by", default=None),
    servedModelName=_VLLM["servedModelName"],
    tensorParallelSize=_VLLM["tensorParallelSize"],
    maxModelLen=_VLLM["maxModelLen"],
    port=_VLLM["port"],
    gpuMemoryUtilization=Opt(Number(0, 1, lo_open=True), "vLLM's share of each GPU",
                             default=float(GPU_MEMORY_UTILIZATION)),
    schedulingPriority=Opt(BOOL, "--scheduling-policy priority (the gateway stamps"
                           " priorities)", default=False),
    toolCallParser=Opt(Choice(tuple(TOOL_CALL_PARSERS)), "vLLM's tool-call parser",
                       default=TOOL_CALL_PARSER),
    tenancy=Opt(Obj({"cacheSalt": Opt(Choice(("team", "developer")), "who shares prefix-cache"
                                      " entries", default="team")}),
                "the prefix cache's tenancy", default={}),
    agentSandbox=Opt(SANDBOX, "agent seats in a sandboxed namespace", default=None),
    observability=Opt(OBSERVABILITY, "alert thresholds and who evaluates them", default={}),
    rolloutGate=Opt(GATE, "the gate's policy and records (without it no promotion passes)",
                    default=None),
    # Each required while what needs it is declared (_service_ips).
    serviceIPs=Opt(Obj({STABLE: Opt(_IP, "stable's Service IP", default=None),
                        CANARY: Opt(_IP, "the canary's Service IP", default=None)}),
                   "each track's fixed cluster IP (the gateway's routes known at preview)",
                   default=None))
OPTIONS = {
    "vllmFleet": Opt(FLEET, "the vLLM fleet on Kubernetes", default=None),
    "kubeconfig": Opt(SECRET, "the fleet's cluster credentials (vllmFleet.kubeconfig: secret)",
                      default=None),
}


def parse(check: Checker, value: Any, kubeconfig_secret: Any,
          deployed: tuple[rollout_gate.Pair, rollout_gate.Pair | None] | None = None, *,
          developers: Sequence[str] = (), receipt_key: bytes | None = None,
          served_with: rollout_gate.ServedWith | None = None) -> VllmFleet | None:
    """The fleet, or None when the stack declares none (or after its problems are recorded).
    `deployed`: (stable, previous) as the stack's last update left them, None before the first.
    `served_with`: the rest of the tuple a promoted pair serves with (LiteLLM's and the
    harnesses' versions, the tool registry), which a promotion's record must pin.
    `receipt_key`: what the gateway signs receipts with (from its master key), None without one.
    `developers`: the names the stack declares under `developers` (a seat holds one's key)."""
    if value is MISSING:
        if kubeconfig_secret is not MISSING:
            check.report("kubeconfig", "a secret", "nothing without vllmFleet (it is the fleet's"
                         " cluster credentials)")
        return None
    start = check.mark()
    fleet = FLEET.read(check, "vllmFleet", value)
    if fleet is None:
        return None
    k = "vllmFleet"
    kubeconfig = _kubeconfig(check, fleet, kubeconfig_secret)
    stable, previous, canary = fleet["stable"], fleet["previous"], fleet["canary"]
    canary = canary and check.clean_since(start) and Canary(build(ServingPair, canary),
                                                           canary["replicas"])
    parser = fleet["toolCallParser"]
    for track, pair in {"stable": stable, "previous": previous,
                        "canary": canary and canary.pair}.items():
        problem = pair and parser and tool_parser_problem(parser, pair.tag)
        if problem:
            check.fail(f"{k}.toolCallParser", parser, f"a name the {track} pair's engine"
                       f" ({pair.tag}) gives the Qwen3-Coder parser: {problem}")
    observability = fleet["observability"]
    if fleet["agentSandbox"]:
        _check_sandbox(check, f"{k}.agentSandbox", fleet["agentSandbox"], value["agentSandbox"],
                       developers)
    gate = fleet["rolloutGate"] and _gate(check, fleet["rolloutGate"], receipt_key, served_with)
    service_ips = _service_ips(check, f"{k}.serviceIPs", fleet["serviceIPs"],
                               value.get("serviceIPs"), canary is not None)
    if not check.clean_since(start):
        return None
    vllm = build(Vllm, {**fleet, "model": stable.model, "revision": stable.revision},
                 gpu_memory_utilization=f"{fleet['gpuMemoryUtilization']:.2f}",
                 scheduling_priority=fleet["schedulingPriority"], tool_call_parser=parser)
    prometheus = observability["prometheus"]
    result = build(VllmFleet, fleet, kubeconfig=kubeconfig, canary=canary or None, vllm=vllm,
                   cache_salt=fleet["tenancy"]["cacheSalt"],
                   agent_sandbox=fleet["agentSandbox"] and _sandbox(fleet["agentSandbox"]),
                   alerts=build(Alerts, observability), gate=gate, deployed=deployed,
                   service_ips=service_ips,
                   **({"prometheus": build(Prometheus, prometheus[1])} if prometheus else {}))
    _check_memory(check, f"{k}.memoryFloor", result)
    _check_rollout(check, result)
    return result if check.clean_since(start) else None


def _kubeconfig(check: Checker, fleet: dict, secret: Any) -> Kubeconfig | None:
    where, ctx = fleet["kubeconfig"], fleet["context"]
    if where == SECRET_FORM:
        if secret is MISSING:
            check.report("kubeconfig", "nothing", "a secret (required with vllmFleet.kubeconfig:"
                         " secret): pulumi config set --secret kubeconfig < kubeconfig.yaml")
            return None
        if not isinstance(secret, str) or "clusters" not in secret:
            check.report("kubeconfig", "a secret that is not a kubeconfig",
                         "a kubeconfig (YAML with clusters, users and contexts)")
            return None
        return Kubeconfig(secret_text=secret, path=None, context=ctx)
    if secret is not MISSING:
        check.report("kubeconfig", "a secret the fleet does not use",
                     f"nothing unless vllmFleet.kubeconfig is {SECRET_FORM}")
    if where is None:
        return None
    return Kubeconfig(secret_text=None, path=None if where == AMBIENT else where, context=ctx)


def _service_ips(check: Checker, key: str, ips: dict | None, given: Any,
                 has_canary: bool) -> dict[str, str]:
    """Each track's fixed cluster IP, when the stack gives them (the gateway routes only then);
    `given`: the stack's serviceIPs, as read."""
    if ips is None:
        return {}
    found = {}
    for track in (STABLE, CANARY):
        ip = ips[track]
        if ip is None:
            # A bad address is reported already; a missing one is reported here.
            if (track == STABLE or has_canary) and track not in given:
                check.report(f"{key}.{track}", "nothing", f"the {track} Service's cluster IP (an"
                             " IP address in the cluster's service range)")
        elif ip in found.values():
            check.fail(f"{key}.{track}", ip, "an address no other track's Service has")
        else:
            found[track] = ip
    return found


def _check_sandbox(check: Checker, key: str, sandbox: dict, given: Mapping[str, Any],
                   developers: Sequence[str]) -> None:
    """What seats need of the rest of the stack, and of the sandbox's other settings."""
    seats, has_seats = sandbox["seats"] or {}, bool(sandbox["seats"])
    known = ", ".join(developers) if developers else "none is declared"
    for name, seat in seats.items():
        if name.startswith(DIALECT_CHECK_PREFIX):
            check.report(f"{key}.seats.{name}", "a reserved name", f"a seat name not starting"
                         f" with '{DIALECT_CHECK_PREFIX}' (the harnesses' dialect checks are"
                         " named so)")
        elif seat and seat["developer"] not in developers:
            check.fail(f"{key}.seats.{name}.developer", seat["developer"], f"a developer declared"
                       f" under `developers` ({known}): the seat holds that developer's virtual"
                       " key" + (" (required)" if seat["developer"] is MISSING else ""))
    # Whose key each seated harness's dialect check asks with: the CI's, its own budget and alias
    # (components/agent_seats runs the check at every harness bump).
    checker = sandbox["dialectCheckDeveloper"]
    if (has_seats or checker is not None) and checker not in developers:
        check.fail(f"{key}.dialectCheckDeveloper", MISSING if checker is None else checker,
                   f"a developer declared under `developers` ({known}) whose key runs each"
                   " seated harness's dialect check, e.g. the CI's; seats need one"
                   + (" (required)" if checker is None else ""))
    if has_seats and "seatImage" not in given:
        check.report(f"{key}.seatImage", "nothing", f"{IMAGE_DIGEST_TEXT} (required with seats:"
                     " the image that holds the harnesses)")
    # Required with seats, since NetworkPolicy never filters a pod's traffic to its own node.
    if has_seats and "nodeGuard" not in given:
        check.report(f"{key}.nodeGuard", "nothing", "{image, apiServer}: the node guard, required"
                     " with seats (an image with python3 and nft, pinned by digest; it keeps each"
                     " seat off its own node, which no NetworkPolicy does)")


def _sandbox(sandbox: dict) -> AgentSandbox:
    # Its way to the gateway is taken from `gateway` once both are parsed (across.py).
    return build(AgentSandbox, sandbox, gateway=None,
                 mirrors=tuple(build(EgressTarget, mirror, name=name)
                               for name, mirror in sandbox["mirrors"].items()),
                 seats={name: build(Seat, seat, name=name)
                        for name, seat in sandbox["seats"].items()},
                 node_guard=sandbox["nodeGuard"])


def _check_memory(check: Checker, key: str, fleet: VllmFleet) -> None:
    """Every declared pair's model, with the fleet's context and GPUs, fits (a rollback to
    `previous` must start too)."""
    floor = fleet.memory_floor
    if floor is None:
        return
    pairs = {"stable": fleet.stable, "previous": fleet.previous,
             "canary": fleet.canary.pair if fleet.canary else None}
    for track, pair in pairs.items():
        if pair is None:
            continue
        facts = floor.models.get(pair.model)
        if facts is None:
            check.report(f"{key}.models", f"no facts for {pair.model} (the {track} pair's model)",
                         "parametersBillions, precision and kvCacheBytesPerToken for every"
                         " declared pair's model")
            continue
        problem = memory_floor_problem(
            parameters_billions=facts.parameters_billions, precision=facts.precision,
            kv_cache_bytes_per_token=facts.kv_cache_bytes_per_token,
            max_model_len=fleet.vllm.max_model_len, gpu_memory_gib=floor.gpu_memory_gib,
            gpu_memory_utilization=float(fleet.vllm.gpu_memory_utilization),
            tensor_parallel_size=fleet.vllm.tensor_parallel_size)
        if problem:
            check.report(f"vllmFleet.{track}", f"{pair.model} at {fleet.vllm.max_model_len}"
                         f" tokens on {fleet.vllm.tensor_parallel_size} GPU(s): {problem}",
                         "a pair, precision, maxModelLen, tensorParallelSize or"
                         " gpuMemoryUtilization whose weights and KV cache fit")


def gate_policy(check: Checker, key: str, value: Any) -> tuple[rollout_gate.Policy, bytes,
                                                                tuple[rollout_gate.Task, ...], bytes] | None:
    """The stack's gate policy, its task set (bytes and tasks) and its trace's bytes (scripts/gate
    reads it too; `check` holds the files config/load.py::read_files read)."""
    start = check.mark()
    policy = POLICY.read(check, key, value)
    if policy is None:
        return None
    return _policy(check, key, policy) if check.clean_since(start) else None


def _policy(check: Checker, key: str, policy: dict) -> tuple[rollout_gate.Policy, bytes,
                                                               tuple[rollout_gate.Task, ...], bytes] | None:
    if None in (policy["tasks"], policy["trace"]):
        return None
    start = check.mark()
    tasks, problems = rollout_gate.parse_tasks(policy["tasks"])
    for problem in problems:
        check.fail(f"{key}.tasks", policy["tasks"], f"a task set ({problem})")
    try:
        trace.parse(json.loads(policy["trace"]))
    except ValueError as error:
        check.fail(f"{key}.trace", policy["trace"], f"a replay trace ({error})")
    if not check.clean_since(start):
        return None
    return rollout_gate.Policy(
        alpha=policy["alpha"], candidate_pass_rate_min=policy["candidatePassRateMin"],
        tool_call_pass_rate_min=policy["toolCallPassRateMin"],
        tool_call_samples=policy["toolCallSamples"], concurrency=policy["concurrency"],
        ttft_p95_seconds=policy["ttftP95Seconds"], itl_p95_seconds=policy["itlP95Seconds"],
        tasks_sha256=rollout_gate.sha256(policy["tasks"]),
        trace_sha256=rollout_gate.sha256(policy["trace"])), policy["tasks"], tasks, policy["trace"]


def _gate(check: Checker, gate: dict, receipt_key: bytes | None,
          served_with: rollout_gate.ServedWith | None) -> RolloutGate | None:
    """The stack's gate policy and the records gate runs wrote into its records folder, each
    judged against its evidence (spear/rollout_gate.py::judge, as scripts/gate judges it). A
    record that does not stand is no config error: it blocks only the promotion to its pair."""
    found = gate["policy"] and _policy(check, "vllmFleet.rolloutGate.policy", gate["policy"])
    folder = gate["records"]
    if found is None or folder is None:
        return None
    policy, tasks_file, tasks, _ = found
    raw: dict[str, Any] = {}
    evidence: dict[str, bytes] = {}
    records, refused = [], []
    for file_name in sorted(name for name in folder if name.endswith(".json") and "/" not in name):
        name = file_name.removesuffix(".json")
        try:
            raw[name] = json.loads(folder[file_name])
            file = raw[name]["evidence"]["file"]
        except (ValueError, KeyError, TypeError) as error:
            refused.append(rollout_gate.Refused(name, None, (f"not a record scripts/gate wrote ({error})",)))
            continue
        if not isinstance(file, str) or relative_subdir(file) != file or "/" in file:
            refused.append(rollout_gate.Refused(name, rollout_gate.claimed_pair(raw[name]), (
                f"evidence.file: {show(file)} is not a file name in the records folder",)))
            continue
        if file in folder:
            evidence[name] = folder[file]
        verdict = rollout_gate.judge(name, raw[name], evidence.get(name), tasks, policy, receipt_key)
        (records if isinstance(verdict, rollout_gate.Record) else refused).append(verdict)
    return RolloutGate(policy=policy, records=tuple(records), refused=tuple(refused), written=raw,
                       evidence=evidence, tasks=tasks_file, served_with=served_with,
                       keys={track: who for track, who in (gate["keys"] or {}).items() if who})


def _check_rollout(check: Checker, fleet: VllmFleet) -> None:
    """The canary differs from stable, and a promotion carries a passing gate record."""
    if fleet.canary and fleet.canary.pair.key == fleet.stable.key:
        check.fail("vllmFleet.canary", fleet.canary.pair.key,
                   "a pair other than stable's: a canary tests a new engine or revision")
    previous = fleet.previous.key if fleet.previous else None
    reasons = rollout_gate.promotion_refusals(fleet.stable.key, previous, fleet.gate_records,
                                              fleet.deployed,
                                              fleet.gate.refused if fleet.gate else (),
                                              fleet.gate.served_with if fleet.gate else None)
    if reasons:
        check.report("vllmFleet.stable", f"a promotion to {rollout_gate.describe(fleet.stable.key)}"
                     f" (previous: {rollout_gate.describe(previous) if previous else 'none'})",
                     "the previous pair (a rollback), or a pair with a passing gate record in"
                     " vllmFleet.rolloutGate (seed 001 step 8): " + "; ".join(reasons))
