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

import ipaddress
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from config.checker import (DNS_LABEL, DNS_LABEL_TEXT, MISSING, NAME, Checker, api_url, ip_address,
                            relative_subdir, show)
from config.options import (BOOL, PORT, SECRET, Choice, Int, Kind, Labels,
                            ListOf, Moved, Named, Number, Obj, Opt, ProjectFile, Raw, Tagged, Text,
                            pattern)
from config.schema.common import HF_REPO, REVISION, SERVED_NAME
from config.types import (ACCESS_MODES, AMBIENT, AgentSandbox, Alerts, Canary, EgressTarget,
                          Kubeconfig, MemoryFloor, ModelCache, ModelFacts, NodeGuard, Prometheus,
                          RolloutGate, Seat, ServingPair, Vllm, VllmFleet)
from spear import rollout_gate, trace
from spear.fleet import CANARY, STABLE
from spear.harness import HARNESSES
from spear.rules import (CACHE_SALT_SCOPES, EGRESS_NETWORK_TEXT, IMAGE, IMAGE_DIGEST, IMAGE_TAG,
                         egress_network_problem, image_pin_problem)
from spear.seats import DIALECT_CHECK_PREFIX, IMAGE_DIGEST_TEXT, image_digest_problem
from spear.vllm import (BYTES_PER_PARAMETER, GPU_MEMORY_UTILIZATION, TOOL_CALL_PARSER,
                        TOOL_CALL_PARSERS, memory_floor_problem, tool_parser_problem)

SECRET_FORM = "secret"  # vllmFleet.kubeconfig: the text of the stack's `kubeconfig` secret
DEFAULT_IMAGE = "vllm/vllm-openai"
_QUANTITY = re.compile(r"[1-9][0-9]*(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
# A seat's name prefixes its Kubernetes objects (seat-<name>, seat-<name>-key) and labels them:
# a DNS-1123 label once prefixed, so letters, digits and inner '-' only.
_SEAT_NAME = re.compile(r"[a-z]([a-z0-9-]{0,29}[a-z0-9])?")
# An API server other than the cluster's `kubernetes` Service, for a pod on the node's network of
# a cluster whose API server advertises a loopback address (the local one).
API_SERVER_TEXT = "the API server's https URL, e.g. https://127.0.0.1:6440"
_API_SERVER = Text(lambda v: v if v.startswith("https://") and api_url(v) else None,
                   API_SERVER_TEXT)
_PINNED = "a version tag (not latest) or an @sha256 digest"


def _kubeconfig_form(value: str) -> str | None:
    if value in (AMBIENT, SECRET_FORM):
        return value
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) and "\n" not in path else None


def _repository(value: str) -> str | None:
    match = IMAGE.fullmatch(value)
    return value if match and not match["tag"] and not match["digest"] else None


def _engine_tag(value: str) -> str | None:
    # The tag pins the engine by itself, digest or not: the tool-parser table reads its version.
    pinned = IMAGE_TAG.fullmatch(value) and image_pin_problem(f"{DEFAULT_IMAGE}:{value}") is None
    return value if pinned else None


def _network(value: str) -> str | None:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError:
        return None


@dataclass(frozen=True)
class EgressNetwork(Kind):
    """An IP network a NetworkPolicy may name (spear/rules.py::egress_network_problem)."""
    allowed: str

    def read(self, check: Checker, key: str, value: Any) -> str | None:
        cidr = Text(_network, self.allowed).read(check, key, value)
        if cidr is not None and egress_network_problem(cidr):
            check.fail(key, cidr, EGRESS_NETWORK_TEXT)
            return None
        return cidr

    def schema(self) -> dict:
        return {"type": "string"}


@dataclass(frozen=True)
class PinnedImage(Kind):
    """An image pinned by digest (spear/seats.py): the reference, or `{file: <path>}`, a file
    holding it, which the machine that built and loaded the image wrote (the local stack's:
    localhosts/images/<builder>.py; a digest differs from one machine's build to the next, so no
    stack file can hold it)."""
    what: str
    builder: str

    @property
    def allowed(self) -> str:
        return IMAGE_DIGEST_TEXT

    def read(self, check: Checker, key: str, value: Any) -> str | None:
        if isinstance(value, Mapping):
            form = _IMAGE_FILE.read(check, key, value)
            path = form and form["file"]
            if not path:
                return None
            value = check.files.get(path, "not read")
            if not isinstance(value, bytes):
                check.report(f"{key}.file", f"{path}: {value}", "a file holding the"
                             f" image's pinned reference (localhosts/images/{self.builder}.py"
                             " writes the local stack's: run scripts/up-local)")
                return None
            value, key = value.decode().strip(), f"{key}.file ({path})"
        problem = image_digest_problem(value)
        if problem:
            check.fail(key, value, f"{IMAGE_DIGEST_TEXT}: {problem}")
            return None
        return value

    def schema(self) -> dict:
        return {"anyOf": [{"type": "string"}, _IMAGE_FILE.schema()]}

    def files(self, value: Any) -> Any:
        if isinstance(value, Mapping) and isinstance(value.get("file"), str) and value["file"]:
            yield value["file"], False


_IMAGE_FILE = Obj({"file": Opt(Text(lambda v: v or None, "the path of a file holding the pinned"
                                    " reference"), "a file the image's builder wrote")})
_PAIR = {
    "tag": Opt(Text(_engine_tag, "an image tag naming the engine version, e.g. v0.24.0 (not"
                    " latest: it moves)"), "the image tag: the engine version"),
    "digest": Opt(pattern(IMAGE_DIGEST, "sha256:<64 lowercase hex> (the image's digest)"),
                  "the image's digest", default=None),
    "model": Opt(HF_REPO, "the Hugging Face repository served"),
    "revision": Opt(REVISION, "its commit (never a branch)"),
}
PAIR = Obj(_PAIR)
_QUANTITY_KIND = pattern(_QUANTITY, "a Kubernetes quantity, e.g. 200Gi (room for the weights)")
_FACTS = Obj({
    "parametersBillions": Opt(Number(0, lo_open=True), "the model's parameters, in billions"),
    "precision": Opt(Choice(tuple(BYTES_PER_PARAMETER)), "its weights' precision"),
    "kvCacheBytesPerToken": Opt(Number(0, lo_open=True), "KV cache bytes per token"),
})
_SEAT = Obj({
    "developer": Opt(Raw({"type": "string"}), "whose virtual key the seat holds (a developer)"),
    "harness": Opt(Choice(HARNESSES), "the coding harness it runs"),
    "workspaceSize": Opt(pattern(_QUANTITY, "a Kubernetes quantity, e.g. 10Gi (the working"
                                 " copy's limit)"), "the working copy's limit", default="10Gi"),
})
SANDBOX = Obj({
    "namespace": Opt(pattern(DNS_LABEL, DNS_LABEL_TEXT), "the agent namespace", default="agents"),
    "gateway": Opt(Moved("the sandbox's way to the gateway is taken from `gateway` (its pods when"
                         " it runs in the cluster, its listen address on a host); remove it"), "",
                   default=None),
    "mirrors": Opt(Named(Obj({
        "cidr": Opt(EgressNetwork("an IP network, e.g. 10.0.0.5/32 (a NetworkPolicy allows"
                                  " addresses, not names)"), "the mirror's address"),
        "ports": Opt(ListOf(PORT, "a non-empty list of TCP ports", non_empty=True), "its ports"),
    }), "a package mirror", non_empty=False), "package mirrors seats may reach", default={}),
    "seatImage": Opt(PinnedImage("the image that holds the harnesses", "seat_image"),
                     "the harnesses' image, by digest (required with seats)", default=None),
    "seats": Opt(Named(_SEAT, "a seat", non_empty=False, name=_SEAT_NAME,
                       name_text="a seat name of lowercase letters, digits and inner '-', starting"
                       " with a letter (at most 31; it names the seat's Kubernetes objects)",
                       map_text="a map of seat name -> {developer, harness, workspaceSize}"),
                 "agent seats, by name", default={}),
    "dialectCheckDeveloper": Opt(Raw({"type": "string"}), "whose key runs each seated harness's"
                                 " dialect check (required with seats)", default=None),
    "nodeGuard": Opt(Obj({
        "image": Opt(PinnedImage("an image with python3 and nft", "node_guard_image"),
                     "python3 and nft, by digest"),
        "apiServer": Opt(_API_SERVER, "the API server (left out: the cluster's Service)",
                         default=None),
    }), "what keeps seats off their node (required with seats)", default=None),
    "runtimeClass": Opt(pattern(_SUBDOMAIN, "a RuntimeClass name (a DNS subdomain, e.g. gvisor)"),
                        "the namespace's RuntimeClass (a sandbox runtime)", default=None),
})
_SCRAPE = {"mode": Opt(Choice(("none", "bundled", "operator")), "who evaluates the rules and"
                       " scrapes"),
           "scrapeIntervalSeconds": Opt(Int(1, 300), "scrapes and rule evaluations", default=30)}
# A Kubernetes label: an optional DNS prefix and a name (63 at most, alphanumeric at each end).
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}"
                        r"[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
PROMETHEUS = Tagged("mode", {
    "none": Obj(_SCRAPE),
    "bundled": Obj({**_SCRAPE,
                    "image": Opt(Text(lambda v: None if image_pin_problem(v) else v,
                                      f"a pinned Prometheus image: {_PINNED}"), "its image"),
                    "port": Opt(PORT, "where it listens on the node's network", default=9090),
                    "retention": Opt(pattern(re.compile(r"[1-9][0-9]*(h|d|w|y)"), "a duration in"
                                             " hours, days, weeks or years, e.g. 15d"),
                                     "how long it keeps samples", default="15d"),
                    "apiServer": Opt(_API_SERVER, "the API server its discovery asks",
                                     default=None)}),
    "operator": Obj({**_SCRAPE,
                     "selectorLabels": Opt(Labels("a map of Kubernetes labels (name: value) the"
                                                  " Operator's selectors match", _LABEL_VALUE,
                                                  _LABEL_KEY),
                                           "the labels its selectors match", default={})}),
})
_SECONDS = Number(0, lo_open=True)
_RATE = Number(0, 1)
OBSERVABILITY = Obj({
    "preemptionsPerHour": Opt(Int(0), "preemptions per hour that alert", default=30),
    "ttftP95Seconds": Opt(_SECONDS, "time to first token, p95", default=2.0),
    "itlP95Seconds": Opt(_SECONDS, "inter-token latency, p95", default=0.1),
    "prefixCacheHitRateMin": Opt(_RATE, "the prefix cache's least hit rate", default=0.3),
    "hatchEscalationsPerHour": Opt(Int(1), "escalations to the hatch per hour", default=20),
    "throughputMinRatio": Opt(Number(0, 1, lo_open=True), "a track's least share of its last"
                              " measured tokens/s after a pair change (left out: recorded only)",
                              default=None),
    # Keys the hatch's one block took over: said where they went, not just "unknown".
    "hatchCapUsd": Opt(Moved("the hatch is declared once, its gateway.hatch.monthlyCapUsd drives"
                             " the gateway's cap, the spend alert rule and the provider-side"
                             " limit"), "", default=None),
    "hatchSpendAlertUsd": Opt(Moved("the hatch is declared once, its gateway.hatch.alertUsd"
                                    " drives the gateway's cap, the spend alert rule and the"
                                    " provider-side limit"), "", default=None),
    "prometheus": Opt(PROMETHEUS, "none, bundled or operator", default=None),
})
POLICY = Obj({
    "alpha": Opt(Number(0, 0.5, lo_open=True), "McNemar's significance level", default=0.05),
    "candidatePassRateMin": Opt(_RATE, "the candidate's least pass rate", default=0.9),
    "toolCallPassRateMin": Opt(_RATE, "the least share of valid tool calls", default=1.0),
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
FLEET = Obj({
    "kubeconfig": Opt(Text(_kubeconfig_form, f"{AMBIENT} ($KUBECONFIG or ~/.kube/config of whoever"
                           f" runs pulumi), {SECRET_FORM} (the stack's `kubeconfig` secret) or"
                           " the absolute path of a kubeconfig file"),
                      "where the provider finds the cluster", default=AMBIENT),
    "context": Opt(pattern(re.compile(r"[A-Za-z0-9][A-Za-z0-9@._:/-]*"), "a kubeconfig context"
                           " name"), "the kubeconfig's context (left out: its current)",
                   default=None),
    "namespace": Opt(pattern(DNS_LABEL, DNS_LABEL_TEXT), "the fleet's namespace", default="vllm"),
    "image": Opt(Text(_repository, "an image repository without tag or digest (stable.tag and"
                      " stable.digest pin it)"), "the engine's image repository",
                 default=DEFAULT_IMAGE),
    "servedModelName": Opt(SERVED_NAME, "the name vLLM serves the model under"),
    "stable": Opt(PAIR, "the pair every ring but pilot is served by"),
    "previous": Opt(PAIR, "the stable pair before the last promotion: the rollback target",
                    default=None),
    "canary": Opt(Obj({**_PAIR, "replicas": Opt(Int(1), "its replicas", default=1)}),
                  "a candidate pair the pilot ring is served by", default=None),
    "replicas": Opt(Int(1), "stable's replicas", default=1),
    "tensorParallelSize": Opt(Int(1), "GPUs per replica", default=1),
    "maxModelLen": Opt(Int(1), "the context window", why="no default: state it in the stack"),
    "gpuMemoryUtilization": Opt(Number(0, 1, lo_open=True), "vLLM's share of each GPU",
                                default=float(GPU_MEMORY_UTILIZATION)),
    "port": Opt(PORT, "vLLM's port", default=8000),
    "schedulingPriority": Opt(BOOL, "--scheduling-policy priority (the gateway stamps"
                              " priorities)", default=False),
    "tenancy": Opt(Obj({"cacheSalt": Opt(Choice(CACHE_SALT_SCOPES), "who shares prefix-cache"
                                         " entries", default="team")}),
                   "the prefix cache's tenancy", default={}),
    "modelCache": Opt(Obj({
        "size": Opt(_QUANTITY_KIND, "room for the weights"),
        "storageClass": Opt(pattern(_SUBDOMAIN, "a storage class name"), "left out: the"
                            " cluster's default", default=None),
        "accessMode": Opt(Choice(ACCESS_MODES), "the volume's access mode",
                          default="ReadWriteMany"),
        "hostPath": Opt(Text(lambda v: v if v.startswith("/") and v != "/" and "\n" not in v
                             else None, "an absolute path on the node other than /"),
                        "a static volume on the node (a cluster without a provisioner)",
                        default=None),
    }), "the weights' volume"),
    "agentSandbox": Opt(SANDBOX, "agent seats in a sandboxed namespace", default=None),
    "observability": Opt(OBSERVABILITY, "alert thresholds and who evaluates them", default={}),
    "rolloutGate": Opt(GATE, "the gate's policy and records (without it no promotion passes)",
                       default=None),
    # Each required while what needs it is declared (_service_ips).
    "serviceIPs": Opt(Obj({STABLE: Opt(_IP, "stable's Service IP", default=None),
                           CANARY: Opt(_IP, "the canary's Service IP", default=None)}),
                      "each track's fixed cluster IP (the gateway's routes known at preview)",
                      default=None),
    "toolCallParser": Opt(Choice(tuple(TOOL_CALL_PARSERS)), "vLLM's tool-call parser",
                          default=TOOL_CALL_PARSER),
    "memoryFloor": Opt(Obj({
        "gpuMemoryGiB": Opt(Number(0, lo_open=True), "each GPU's memory",
                            why="each GPU's memory"),
        "models": Opt(Named(_FACTS, "model facts", name=re.compile(r".+"),
                            map_text="a map of Hugging Face repository id -> {"
                            + ", ".join(_FACTS.fields) + "}"), "the facts of each pair's model"),
    }), "model facts the memory floor is computed from", default=None),
    "ingressFrom": Opt(ListOf(EgressNetwork("an IP network, e.g. 10.0.0.5/32"),
                              f"a list of IP networks ({EGRESS_NETWORK_TEXT})"),
                       "addresses outside the pods that reach vLLM", default=()),
})
OPTIONS = {
    "vllmFleet": Opt(FLEET, "the vLLM fleet on Kubernetes", default=None),
    "kubeconfig": Opt(SECRET, "the fleet's cluster credentials (vllmFleet.kubeconfig: secret)",
                      default=None),
}


def parse(check: Checker, value: Any, kubeconfig_secret: Any,
          deployed: tuple[rollout_gate.Pair, rollout_gate.Pair | None] | None = None, *,
          developers: Sequence[str] = (), receipt_key: bytes | None = None) -> VllmFleet | None:
    """The fleet, or None when the stack declares none (or after its problems are recorded).
    `deployed`: (stable, previous) as the stack's last update left them, None before the first.
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
    stable, previous = _pair(fleet["stable"]), _pair(fleet["previous"])
    canary = fleet["canary"] and Canary(_pair(fleet["canary"]), fleet["canary"]["replicas"])
    pairs = {"stable": stable, "previous": previous, "canary": canary and canary.pair}
    parser = fleet["toolCallParser"]
    for track, pair in pairs.items():
        problem = pair and parser and tool_parser_problem(parser, pair.tag)
        if problem:
            check.fail(f"{k}.toolCallParser", parser, f"a name the {track} pair's engine"
                       f" ({pair.tag}) gives the Qwen3-Coder parser: {problem}")
    observability = fleet["observability"]
    if fleet["agentSandbox"]:
        _check_sandbox(check, f"{k}.agentSandbox", fleet["agentSandbox"], value["agentSandbox"],
                       developers)
    gate = fleet["rolloutGate"] and _gate(check, fleet["rolloutGate"], receipt_key)
    service_ips = _service_ips(check, f"{k}.serviceIPs", fleet["serviceIPs"], canary is not None)
    if not check.clean_since(start):
        return None
    gpu_memory = fleet["gpuMemoryUtilization"]
    cache, floor = fleet["modelCache"], fleet["memoryFloor"]
    result = VllmFleet(
        kubeconfig=kubeconfig, namespace=fleet["namespace"], image=fleet["image"], stable=stable,
        previous=previous, canary=canary, replicas=fleet["replicas"],
        vllm=Vllm(model=stable.model, revision=stable.revision,
                  served_model_name=fleet["servedModelName"],
                  tensor_parallel_size=fleet["tensorParallelSize"],
                  max_model_len=fleet["maxModelLen"], port=fleet["port"],
                  gpu_memory_utilization=f"{gpu_memory:.2f}",
                  scheduling_priority=fleet["schedulingPriority"], tool_call_parser=parser),
        cache_salt=fleet["tenancy"]["cacheSalt"],
        model_cache=ModelCache(size=cache["size"], storage_class=cache["storageClass"],
                               access_mode=cache["accessMode"], host_path=cache["hostPath"]),
        agent_sandbox=fleet["agentSandbox"] and _sandbox(fleet["agentSandbox"]),
        alerts=_alerts(observability),
        prometheus=_prometheus(observability["prometheus"]), gate=gate, deployed=deployed,
        service_ips=service_ips, ingress_from=tuple(fleet["ingressFrom"]),
        memory_floor=floor and MemoryFloor(floor["gpuMemoryGiB"], {
            model: ModelFacts(parameters_billions=facts["parametersBillions"],
                              precision=facts["precision"],
                              kv_cache_bytes_per_token=facts["kvCacheBytesPerToken"])
            for model, facts in floor["models"].items()}))
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


def _pair(pair: dict | None) -> ServingPair | None:
    if pair is None or None in (pair["tag"], pair["model"], pair["revision"]):
        return None
    return ServingPair(tag=pair["tag"], digest=pair["digest"], model=pair["model"],
                       revision=pair["revision"])


def _service_ips(check: Checker, key: str, ips: dict | None, has_canary: bool) -> dict[str, str]:
    """Each track's fixed cluster IP, when the stack gives them (the gateway routes only then)."""
    if ips is None:
        return {}
    found = {}
    for track in (STABLE, CANARY):
        ip = ips[track]
        if ip is None:
            if (track == STABLE or has_canary) and f"{key}.{track}" not in check.keys_at_fault():
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
    guard = sandbox["nodeGuard"]
    return AgentSandbox(
        namespace=sandbox["namespace"],
        gateway=None,  # taken from `gateway` once both are parsed (config/schema/__init__.py)
        mirrors=tuple(EgressTarget(name, mirror["cidr"], tuple(mirror["ports"]))
                      for name, mirror in sandbox["mirrors"].items()),
        seat_image=sandbox["seatImage"],
        seats={name: Seat(name=name, developer=seat["developer"], harness=seat["harness"],
                          workspace_size=seat["workspaceSize"])
               for name, seat in sandbox["seats"].items()},
        dialect_check_developer=sandbox["dialectCheckDeveloper"],
        node_guard=guard and NodeGuard(image=guard["image"], api_server=guard["apiServer"]),
        runtime_class=sandbox["runtimeClass"])


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


def _alerts(observability: dict) -> Alerts:
    return Alerts(preemptions_per_hour=observability["preemptionsPerHour"],
                  ttft_p95_seconds=observability["ttftP95Seconds"],
                  itl_p95_seconds=observability["itlP95Seconds"],
                  prefix_cache_hit_rate_min=observability["prefixCacheHitRateMin"],
                  hatch_escalations_per_hour=observability["hatchEscalationsPerHour"],
                  throughput_min_ratio=observability["throughputMinRatio"])


def _prometheus(read: tuple[str, dict] | None) -> Prometheus:
    if read is None:
        return Prometheus(mode="none", scrape_interval_seconds=30)
    mode, settings = read
    return Prometheus(mode=mode, scrape_interval_seconds=settings["scrapeIntervalSeconds"],
                      **{field: settings[key] for key, field in (
                          ("image", "image"), ("port", "port"), ("retention", "retention"),
                          ("apiServer", "api_server"), ("selectorLabels", "selector_labels"))
                         if key in settings})


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


def _gate(check: Checker, gate: dict, receipt_key: bytes | None) -> RolloutGate | None:
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
                       evidence=evidence, tasks=tasks_file,
                       keys={track: who for track, who in (gate["keys"] or {}).items() if who})


def _check_rollout(check: Checker, fleet: VllmFleet) -> None:
    """The canary differs from stable, and a promotion carries a passing gate record."""
    if fleet.canary and fleet.canary.pair.key == fleet.stable.key:
        check.fail("vllmFleet.canary", fleet.canary.pair.key,
                   "a pair other than stable's: a canary tests a new engine or revision")
    previous = fleet.previous.key if fleet.previous else None
    reasons = rollout_gate.promotion_refusals(fleet.stable.key, previous, fleet.gate_records,
                                              fleet.deployed,
                                              fleet.gate.refused if fleet.gate else ())
    if reasons:
        check.report("vllmFleet.stable", f"a promotion to {rollout_gate.describe(fleet.stable.key)}"
                     f" (previous: {rollout_gate.describe(previous) if previous else 'none'})",
                     "the previous pair (a rollback), or a pair with a passing gate record in"
                     " vllmFleet.rolloutGate (seed 001 step 8): " + "; ".join(reasons))
