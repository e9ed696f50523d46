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

import contextlib
import ipaddress
import json
import os
import re
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from config.checker import (DNS_LABEL, DNS_LABEL_TEXT, MISSING, NAME, Checker, api_url, get,
                            ip_address, relative_subdir, show)
from config.types import (ACCESS_MODES, AMBIENT, AgentSandbox, Alerts, Canary,
                          EgressTarget, Kubeconfig, MemoryFloor, ModelCache,
                          ModelFacts, NodeGuard, PROMETHEUS_MODES, Prometheus, RolloutGate, Seat,
                          ServingPair, Vllm, VllmFleet)
from config.schema.common import HF_REPO, SERVED_NAME, model_revision
from spear import rollout_gate, trace
from spear.fleet import CANARY, STABLE
from spear.harness import HARNESSES
from spear.rules import (CACHE_SALT_SCOPES, EGRESS_NETWORK_TEXT, IMAGE, IMAGE_DIGEST, IMAGE_TAG,
                         egress_network_problem, image_pin_problem)
from spear.seats import DIALECT_CHECK_PREFIX, IMAGE_DIGEST_TEXT, image_digest_problem
from spear.vllm import (BYTES_PER_PARAMETER, GPU_MEMORY_UTILIZATION, TOOL_CALL_PARSER,
                        TOOL_CALL_PARSERS, memory_floor_problem, tool_parser_problem)

KEYS = ("vllmFleet", "kubeconfig")
OBJECT_KEYS = ("vllmFleet",)
SECRET = "secret"  # vllmFleet.kubeconfig: the text of the stack's `kubeconfig` secret
DEFAULT_IMAGE = "vllm/vllm-openai"

_FLEET_KEYS = ("kubeconfig", "context", "namespace", "image",
               "servedModelName", "stable", "previous", "canary", "replicas",
               "tensorParallelSize", "maxModelLen", "gpuMemoryUtilization", "port",
               "schedulingPriority", "tenancy", "modelCache", "agentSandbox", "observability",
               "rolloutGate", "serviceIPs", "toolCallParser", "memoryFloor", "ingressFrom")
_PAIR_KEYS = ("tag", "digest", "model", "revision")
_FACT_KEYS = ("parametersBillions", "precision", "kvCacheBytesPerToken")
_ALERT_KEYS = ("preemptionsPerHour", "ttftP95Seconds", "itlP95Seconds", "prefixCacheHitRateMin",
               "hatchEscalationsPerHour", "throughputMinRatio")
# Keys the hatch's one block took over: said where they went, not just "unknown".
_MOVED_ALERT_KEYS = {"hatchCapUsd": "gateway.hatch.monthlyCapUsd",
                     "hatchSpendAlertUsd": "gateway.hatch.alertUsd"}
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_QUANTITY = re.compile(r"[1-9][0-9]*(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
_CONTEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9@._:/-]*")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
_VERSION_TEXT = "a version (letters, digits, '.', '_', '+', '-')"
_KUBECONFIG_TEXT = (f"{AMBIENT} ($KUBECONFIG or ~/.kube/config of whoever runs pulumi), {SECRET}"
                    " (the stack's `kubeconfig` secret) or the absolute path of a kubeconfig file")


def parse(check: Checker, value: Any, kubeconfig_secret: Any,
          deployed: tuple[rollout_gate.Pair, rollout_gate.Pair | None] | None = None, *,
          developers: Sequence[str] = (), has_gateway: bool = False,
          receipt_key: bytes | None = None) -> VllmFleet | None:
    """The fleet, or None when the stack declares none (or after its problems are recorded).
    `deployed`: (stable, previous) as the stack's last update left them, None before the first.
    `receipt_key`: what the gateway signs receipts with (from its master key), None without one.
    `developers`: the names the stack declares under `developers` (a seat holds one's key);
    `has_gateway`: whether it declares a gateway (a seat's harness reaches coder through it)."""
    if value is MISSING:
        if kubeconfig_secret is not MISSING:
            check.report("kubeconfig", "a secret", "nothing without vllmFleet (it is the fleet's"
                         " cluster credentials)")
        return None
    start = check.mark()
    fleet = check.obj("vllmFleet", value, _FLEET_KEYS)
    if fleet is None:
        return None
    k = "vllmFleet"
    kubeconfig = _kubeconfig(check, get(fleet, "kubeconfig"), get(fleet, "context"),
                             kubeconfig_secret)
    tp = check.integer(f"{k}.tensorParallelSize", get(fleet, "tensorParallelSize"), 1, default=1)
    gpu_memory = check.number(f"{k}.gpuMemoryUtilization", get(fleet, "gpuMemoryUtilization"), 0,
                              1, default=float(GPU_MEMORY_UTILIZATION), lo_open=True)
    stable = _pair(check, f"{k}.stable", get(fleet, "stable"))
    previous = (None if get(fleet, "previous") is MISSING
                else _pair(check, f"{k}.previous", get(fleet, "previous")))
    canary = _canary(check, f"{k}.canary", get(fleet, "canary"))
    vllm = Vllm(
        model=stable.model if stable else "",
        revision=stable.revision if stable else "",
        served_model_name=check.pattern(f"{k}.servedModelName", get(fleet, "servedModelName"),
                                        SERVED_NAME,
                                        "a model name (letters, digits, '.', '_', '-'; at most 64)"),
        tensor_parallel_size=tp,
        max_model_len=check.integer(f"{k}.maxModelLen", get(fleet, "maxModelLen"), 1,
                                    note="no default: state it in the stack"),
        port=check.port(f"{k}.port", get(fleet, "port"), 8000),
        gpu_memory_utilization=f"{gpu_memory:.2f}" if gpu_memory else GPU_MEMORY_UTILIZATION,
        scheduling_priority=check.boolean(f"{k}.schedulingPriority",
                                          get(fleet, "schedulingPriority"), False),
        tool_call_parser=_tool_call_parser(check, f"{k}.toolCallParser",
                                           get(fleet, "toolCallParser"),
                                           {"stable": stable, "previous": previous,
                                            "canary": canary.pair if canary else None}),
    )
    gate = _gate(check, f"{k}.rolloutGate", get(fleet, "rolloutGate"), receipt_key)
    result = VllmFleet(
        kubeconfig=kubeconfig,
        namespace=check.pattern(f"{k}.namespace", get(fleet, "namespace"), DNS_LABEL, DNS_LABEL_TEXT,
                                default="vllm"),
        image=check.text(f"{k}.image", get(fleet, "image"), _repository,
                         "an image repository without tag or digest (stable.tag and"
                         " stable.digest pin it)", default=DEFAULT_IMAGE),
        stable=stable,
        previous=previous,
        canary=canary,
        replicas=check.integer(f"{k}.replicas", get(fleet, "replicas"), 1, default=1),
        vllm=vllm,
        cache_salt=_tenancy(check, f"{k}.tenancy", get(fleet, "tenancy")),
        model_cache=_model_cache(check, f"{k}.modelCache", get(fleet, "modelCache")),
        agent_sandbox=_agent_sandbox(check, f"{k}.agentSandbox", get(fleet, "agentSandbox"),
                                     developers, has_gateway),
        alerts=_alerts(check, f"{k}.observability", get(fleet, "observability")),
        prometheus=_prometheus(check, f"{k}.observability.prometheus",
                               get(fleet, "observability")),
        gate=gate,
        deployed=deployed,
        service_ips=_service_ips(check, f"{k}.serviceIPs", get(fleet, "serviceIPs"), canary is not None),
        ingress_from=_ingress_from(check, f"{k}.ingressFrom", get(fleet, "ingressFrom")),
        memory_floor=_memory_floor(check, f"{k}.memoryFloor", get(fleet, "memoryFloor")),
    )
    if not check.clean_since(start):
        return None
    _check_memory(check, f"{k}.memoryFloor", result)
    _check_rollout(check, result)
    return result if check.clean_since(start) else None


def _kubeconfig(check: Checker, value: Any, context: Any, secret: Any) -> Kubeconfig | None:
    key = "vllmFleet.kubeconfig"
    where = check.text(key, value, _kubeconfig_form, _KUBECONFIG_TEXT, default=AMBIENT)
    ctx = (None if context is MISSING else
           check.pattern("vllmFleet.context", context, _CONTEXT, "a kubeconfig context name"))
    if where == SECRET:
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
                     f"nothing unless vllmFleet.kubeconfig is {SECRET}")
    if where is None:
        return None
    return Kubeconfig(secret_text=None, path=None if where == AMBIENT else where, context=ctx)


def _kubeconfig_form(value: str) -> str | None:
    if value in (AMBIENT, SECRET):
        return value
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) and "\n" not in path else None


def _repository(value: str) -> str | None:
    match = IMAGE.fullmatch(value)
    return value if match and not match["tag"] and not match["digest"] else None


def _pair(check: Checker, key: str, value: Any,
          allowed_keys: tuple[str, ...] = _PAIR_KEYS) -> ServingPair | None:
    start = check.mark()
    pair = check.obj(key, value, allowed_keys)
    if pair is None:
        return None
    tag = check.text(f"{key}.tag", get(pair, "tag"), _engine_tag,
                     "an image tag naming the engine version, e.g. v0.24.0 (not latest: it moves)")
    digest = (None if get(pair, "digest") is MISSING else
              check.pattern(f"{key}.digest", get(pair, "digest"), IMAGE_DIGEST,
                            "sha256:<64 lowercase hex> (the image's digest)"))
    model = check.pattern(f"{key}.model", get(pair, "model"), HF_REPO,
                          "a Hugging Face repository id (<owner>/<name>)")
    revision = model_revision(check, f"{key}.revision", get(pair, "revision"))
    return (ServingPair(tag=tag, digest=digest, model=model, revision=revision)
            if check.clean_since(start) else None)


def _engine_tag(value: str) -> str | None:
    # The tag pins the engine by itself, digest or not: the tool-parser table reads its version.
    pinned = IMAGE_TAG.fullmatch(value) and image_pin_problem(f"{DEFAULT_IMAGE}:{value}") is None
    return value if pinned else None


def _canary(check: Checker, key: str, value: Any) -> Canary | None:
    if value is MISSING:
        return None
    replicas = (check.integer(f"{key}.replicas", value.get("replicas", MISSING), 1, default=1)
                if isinstance(value, Mapping) else None)
    pair = _pair(check, key, value, (*_PAIR_KEYS, "replicas"))
    return Canary(pair, replicas) if pair and replicas else None


def _service_ips(check: Checker, key: str, value: Any, has_canary: bool) -> dict[str, str]:
    """Each track's fixed cluster IP, when the stack gives them (the gateway routes only then)."""
    if value is MISSING:
        return {}
    ips = check.obj(key, value, (STABLE, CANARY))
    if ips is None:
        return {}
    found = {}
    for track in (STABLE, CANARY):
        given = get(ips, track)
        if given is MISSING:
            if track == STABLE or has_canary:
                check.report(f"{key}.{track}", "nothing", f"the {track} Service's cluster IP (an"
                             " IP address in the cluster's service range)")
            continue
        ip = check.text(f"{key}.{track}", given, ip_address, "an IP address in the cluster's service range")
        if ip in found.values():
            check.fail(f"{key}.{track}", given, "an address no other track's Service has")
        elif ip:
            found[track] = ip
    return found


def _ingress_from(check: Checker, key: str, value: Any) -> tuple[str, ...]:
    """The addresses outside the cluster's pods that reach the vLLM pods' port (its ingress
    NetworkPolicy's ipBlocks), each one host or one subnet."""
    if value is MISSING:
        return ()
    if not isinstance(value, list):
        check.fail(key, value, f"a list of IP networks ({EGRESS_NETWORK_TEXT})")
        return ()
    found = []
    for i, item in enumerate(value):
        cidr = check.text(f"{key}[{i}]", item, _network, "an IP network, e.g. 10.0.0.5/32")
        if cidr is not None and egress_network_problem(cidr):
            check.fail(f"{key}[{i}]", cidr, EGRESS_NETWORK_TEXT)
        elif cidr is not None:
            found.append(cidr)
    return tuple(found)


def _tenancy(check: Checker, key: str, value: Any) -> str | None:
    tenancy = check.obj(key, value, ("cacheSalt",), required=False)
    if tenancy is None:
        return None
    return check.choice(f"{key}.cacheSalt", get(tenancy, "cacheSalt"), CACHE_SALT_SCOPES,
                        default="team")


def _model_cache(check: Checker, key: str, value: Any) -> ModelCache | None:
    start = check.mark()
    cache = check.obj(key, value, ("size", "storageClass", "accessMode", "hostPath"))
    if cache is None:
        return None
    host_path = (None if get(cache, "hostPath") is MISSING else
                 check.text(f"{key}.hostPath", get(cache, "hostPath"),
                            lambda v: v if v.startswith("/") and v != "/" and "\n" not in v else None,
                            "an absolute path on the node other than /"))
    result = ModelCache(
        size=check.pattern(f"{key}.size", get(cache, "size"), _QUANTITY,
                           "a Kubernetes quantity, e.g. 200Gi (room for the weights)"),
        storage_class=(None if get(cache, "storageClass") is MISSING else
                       check.pattern(f"{key}.storageClass", get(cache, "storageClass"), _SUBDOMAIN,
                                     "a storage class name")),
        access_mode=check.choice(f"{key}.accessMode", get(cache, "accessMode"), ACCESS_MODES,
                                 default="ReadWriteMany"),
        host_path=host_path,
    )
    return result if check.clean_since(start) else None


def _target(check: Checker, key: str, name: str, value: Any) -> EgressTarget | None:
    start = check.mark()
    target = check.obj(key, value, ("cidr", "ports"))
    if target is None:
        return None
    cidr = check.text(f"{key}.cidr", get(target, "cidr"), _network,
                      "an IP network, e.g. 10.0.0.5/32 (a NetworkPolicy allows addresses, not"
                      " names)")
    if cidr is not None and egress_network_problem(cidr):
        check.fail(f"{key}.cidr", cidr, EGRESS_NETWORK_TEXT)
        cidr = None
    ports_value = get(target, "ports")
    ports: list[int] = []
    if not isinstance(ports_value, list) or not ports_value:
        check.fail(f"{key}.ports", ports_value, "a non-empty list of TCP ports"
                   + (" (required)" if ports_value is MISSING else ""))
    else:
        ports = [check.port(f"{key}.ports[{i}]", port) for i, port in enumerate(ports_value)]
    return EgressTarget(name, cidr, tuple(ports)) if check.clean_since(start) else None


def _network(value: str) -> str | None:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError:
        return None


def _agent_sandbox(check: Checker, key: str, value: Any, developers: Sequence[str],
                   has_gateway: bool) -> AgentSandbox | None:
    if value is MISSING:
        return None
    start = check.mark()
    sandbox = check.obj(key, value, ("namespace", "gateway", "mirrors", "seatImage", "seats",
                                     "dialectCheckDeveloper", "nodeGuard", "runtimeClass"))
    if sandbox is None:
        return None
    if get(sandbox, "gateway") is not MISSING:
        check.report(f"{key}.gateway", "an address typed twice", "nothing: the sandbox's way to the"
                     " gateway is taken from `gateway` (its pods when it runs in the cluster, its"
                     " listen address on a host); remove it")
    mirrors = check.named_map(f"{key}.mirrors", get(sandbox, "mirrors"), "a package mirror",
                              required=False)
    declared_seats = get(sandbox, "seats")
    has_seats = isinstance(declared_seats, Mapping) and bool(declared_seats)
    result = AgentSandbox(
        namespace=check.pattern(f"{key}.namespace", get(sandbox, "namespace"), DNS_LABEL, DNS_LABEL_TEXT,
                                default="agents"),
        gateway=None,  # taken from `gateway` once both are parsed (config/schema/__init__.py)
        mirrors=tuple(_target(check, f"{key}.mirrors.{name}", name, item)
                      for name, item in (mirrors or {}).items()),
        seat_image=_pinned_image(check, f"{key}.seatImage", get(sandbox, "seatImage"), has_seats,
                                 "the image that holds the harnesses", "images/seat_image"),
        seats=_seats(check, f"{key}.seats", declared_seats, developers, has_gateway),
        dialect_check_developer=_dialect_check_developer(
            check, f"{key}.dialectCheckDeveloper", get(sandbox, "dialectCheckDeveloper"),
            developers, has_seats),
        node_guard=_node_guard(check, f"{key}.nodeGuard", get(sandbox, "nodeGuard"), has_seats),
        runtime_class=None if get(sandbox, "runtimeClass") is MISSING else check.pattern(
            f"{key}.runtimeClass", get(sandbox, "runtimeClass"), _SUBDOMAIN,
            "a RuntimeClass name (a DNS subdomain, e.g. gvisor)"),
    )
    return result if check.clean_since(start) else None


# A seat's name prefixes its Kubernetes objects (seat-<name>, seat-<name>-key) and labels them:
# a DNS-1123 label once prefixed, so letters, digits and inner '-' only.
_SEAT_NAME = re.compile(r"[a-z]([a-z0-9-]{0,29}[a-z0-9])?")
_SEAT_NAME_TEXT = ("a seat name of lowercase letters, digits and inner '-', starting with a letter"
                   " (at most 31; it names the seat's Kubernetes objects)")


def _dialect_check_developer(check: Checker, key: str, value: Any, developers: Sequence[str],
                             has_seats: bool) -> str | None:
    """Whose key each seated harness's dialect check asks with: the CI's, its own budget and
    alias (components/agent_seats runs the check at every harness bump)."""
    if value is MISSING and not has_seats:
        return None
    known = ", ".join(developers) if developers else "none is declared"
    return check.text(key, value, lambda v: v if v in developers else None,
                      f"a developer declared under `developers` ({known}) whose key runs each"
                      " seated harness's dialect check, e.g. the CI's; seats need one")


def _node_guard(check: Checker, key: str, value: Any, has_seats: bool) -> NodeGuard | None:
    """What keeps seats off their node (components/agent_seats/node_guard.py): required with
    seats, since NetworkPolicy never filters a pod's traffic to its own node."""
    if value is MISSING:
        if has_seats:
            check.report(key, "nothing", "{image, apiServer}: the node guard, required with seats"
                         " (an image with python3 and nft, pinned by digest; it keeps each seat"
                         " off its own node, which no NetworkPolicy does)")
        return None
    start = check.mark()
    guard = check.obj(key, value, ("image", "apiServer"))
    if guard is None:
        return None
    image = _pinned_image(check, f"{key}.image", get(guard, "image"), True,
                          "an image with python3 and nft", "images/node_guard_image")
    api_server = None if get(guard, "apiServer") is MISSING else check.text(
        f"{key}.apiServer", get(guard, "apiServer"), _api_server, API_SERVER_TEXT)
    return NodeGuard(image=image, api_server=api_server) if check.clean_since(start) and image else None


def _api_server(value: str) -> str | None:
    return value if value.startswith("https://") and api_url(value) else None


# An API server other than the cluster's `kubernetes` Service, for a pod on the node's network of
# a cluster whose API server advertises a loopback address (the local one).
API_SERVER_TEXT = "the API server's https URL, e.g. https://127.0.0.1:6440"


def _pinned_image(check: Checker, key: str, value: Any, required: bool, what: str,
                  builder: str) -> str | None:
    """An image pinned by digest (spear/seats.py): the reference, or `{file: <path>}`, a file
    holding it, which the machine that built and loaded the image wrote (the local stack's:
    localhosts/<builder>.py; a digest differs from one machine's build to the next, so no stack
    file can hold it)."""
    if value is MISSING:
        if required:
            check.report(key, "nothing", f"{IMAGE_DIGEST_TEXT} (required with seats: {what})")
        return None
    if isinstance(value, Mapping):
        form = check.obj(key, value, ("file",))
        path = form and check.text(f"{key}.file", get(form, "file"), lambda v: v or None,
                                   "the path of a file holding the pinned reference")
        if not path:
            return None
        try:
            value = Path(path).expanduser().read_text().strip()
        except OSError as err:
            check.report(f"{key}.file", f"{path}: {err.strerror}", "a file holding the"
                         f" image's pinned reference (localhosts/{builder}.py writes the local"
                         " stack's: run scripts/up-local)")
            return None
        key = f"{key}.file ({path})"
    problem = image_digest_problem(value)
    if problem:
        check.fail(key, value, f"{IMAGE_DIGEST_TEXT}: {problem}")
        return None
    return value


def _seats(check: Checker, key: str, value: Any, developers: Sequence[str],
           has_gateway: bool) -> dict[str, Seat]:
    """The seats by name; every seat is checked even when the stack has no gateway, so that
    every problem is reported at once."""
    if value is MISSING:
        return {}
    if not isinstance(value, Mapping):
        check.fail(key, value, "a map of seat name -> {developer, harness, workspaceSize}")
        return {}
    if value and not has_gateway:
        check.report(key, "seats without a gateway", "seats only with `gateway` (each seat's"
                     " harness reaches coder through it with its developer's virtual key)")
    known = ", ".join(developers) if developers else "none is declared"
    seats = {}
    for name, item in value.items():
        if not (isinstance(name, str) and _SEAT_NAME.fullmatch(name)):
            check.report(f"{key}.{name}", "an invalid name", _SEAT_NAME_TEXT)
            continue
        if name.startswith(DIALECT_CHECK_PREFIX):
            check.report(f"{key}.{name}", "a reserved name", f"a seat name not starting with"
                         f" '{DIALECT_CHECK_PREFIX}' (the harnesses' dialect checks are named so)")
            continue
        start = check.mark()
        seat = check.obj(f"{key}.{name}", item, ("developer", "harness", "workspaceSize"))
        if seat is None:
            continue
        developer = check.text(f"{key}.{name}.developer", get(seat, "developer"),
                               lambda v: v if v in developers else None,
                               f"a developer declared under `developers` ({known}): the seat"
                               " holds that developer's virtual key")
        harness = check.choice(f"{key}.{name}.harness", get(seat, "harness"), HARNESSES)
        size = check.pattern(f"{key}.{name}.workspaceSize", get(seat, "workspaceSize"), _QUANTITY,
                             "a Kubernetes quantity, e.g. 10Gi (the working copy's limit)",
                             default="10Gi")
        if check.clean_since(start):
            seats[name] = Seat(name=name, developer=developer, harness=harness,
                               workspace_size=size)
    return seats


def _tool_call_parser(check: Checker, key: str, value: Any,
                      pairs: dict[str, ServingPair | None]) -> str:
    """The parser name, which every declared pair's engine must know as the Qwen3-Coder parser
    (a rollback to `previous` runs it too)."""
    parser = check.choice(key, value, tuple(TOOL_CALL_PARSERS), default=TOOL_CALL_PARSER)
    for track, pair in pairs.items():
        problem = pair and parser and tool_parser_problem(parser, pair.tag)
        if problem:
            check.fail(key, parser, f"a name the {track} pair's engine ({pair.tag}) gives the"
                       f" Qwen3-Coder parser: {problem}")
    return parser or TOOL_CALL_PARSER


def _memory_floor(check: Checker, key: str, value: Any) -> MemoryFloor | None:
    if value is MISSING:
        return None
    start = check.mark()
    floor = check.obj(key, value, ("gpuMemoryGiB", "models"))
    if floor is None:
        return None
    gpu = check.number(f"{key}.gpuMemoryGiB", get(floor, "gpuMemoryGiB"), 0, lo_open=True,
                       note="each GPU's memory")
    models = get(floor, "models")
    if not isinstance(models, dict) or not models:
        check.fail(f"{key}.models", models, "a map of Hugging Face repository id -> {"
                   + ", ".join(_FACT_KEYS) + "}")
        models = {}
    facts = {}
    for model, item in models.items():
        mkey = f"{key}.models.{model}"
        fact = check.obj(mkey, item, _FACT_KEYS)
        if fact is not None:
            facts[model] = ModelFacts(
                parameters_billions=check.number(f"{mkey}.parametersBillions",
                                                 get(fact, "parametersBillions"), 0,
                                                 lo_open=True),
                precision=check.choice(f"{mkey}.precision", get(fact, "precision"),
                                       tuple(BYTES_PER_PARAMETER)),
                kv_cache_bytes_per_token=check.number(f"{mkey}.kvCacheBytesPerToken",
                                                      get(fact, "kvCacheBytesPerToken"), 0,
                                                      lo_open=True))
    return MemoryFloor(gpu, facts) if check.clean_since(start) else None


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


def _alerts(check: Checker, key: str, value: Any) -> Alerts | None:
    start = check.mark()
    alerts = check.obj(key, value, (*_ALERT_KEYS, *_MOVED_ALERT_KEYS, "prometheus"),
                       required=False)
    if alerts is None:
        return None
    for moved, home in _MOVED_ALERT_KEYS.items():
        if moved in alerts:
            check.report(f"{key}.{moved}", "a second hatch cap or spend alert",
                         f"nothing: the hatch is declared once, its {home} drives the gateway's"
                         " cap, the spend alert rule and the provider-side limit")
    result = Alerts(
        preemptions_per_hour=check.integer(f"{key}.preemptionsPerHour",
                                           get(alerts, "preemptionsPerHour"), 0, default=30),
        ttft_p95_seconds=check.number(f"{key}.ttftP95Seconds", get(alerts, "ttftP95Seconds"), 0,
                                      default=2.0, lo_open=True),
        itl_p95_seconds=check.number(f"{key}.itlP95Seconds", get(alerts, "itlP95Seconds"), 0,
                                     default=0.1, lo_open=True),
        prefix_cache_hit_rate_min=check.number(f"{key}.prefixCacheHitRateMin",
                                               get(alerts, "prefixCacheHitRateMin"), 0, 1,
                                               default=0.3),
        hatch_escalations_per_hour=check.integer(f"{key}.hatchEscalationsPerHour",
                                                 get(alerts, "hatchEscalationsPerHour"), 1,
                                                 default=20),
        throughput_min_ratio=None if get(alerts, "throughputMinRatio") is MISSING else
        check.number(f"{key}.throughputMinRatio", get(alerts, "throughputMinRatio"), 0, 1,
                     lo_open=True),
    )
    return result if check.clean_since(start) else None


# What each mode of observability.prometheus takes beside `mode` and `scrapeIntervalSeconds`.
_PROMETHEUS_KEYS = {"none": (), "bundled": ("image", "port", "retention", "apiServer"),
                    "operator": ("selectorLabels",)}
_RETENTION = re.compile(r"[1-9][0-9]*(h|d|w|y)")
# A Kubernetes label: an optional DNS prefix and a name (63 at most, alphanumeric at each end).
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}"
                        r"[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def _prometheus(check: Checker, key: str, observability: Any) -> Prometheus:
    value = get(observability, "prometheus") if isinstance(observability, Mapping) else MISSING
    default = Prometheus(mode="none", scrape_interval_seconds=30)
    if value is MISSING:
        return default
    if not isinstance(value, Mapping):
        check.obj(key, value, ("mode", "scrapeIntervalSeconds"))  # says what it must be
        return default
    mode = check.choice(f"{key}.mode", get(value, "mode"), PROMETHEUS_MODES)
    if mode is None:
        return default
    settings = check.obj(key, value, ("mode", "scrapeIntervalSeconds", *_PROMETHEUS_KEYS[mode]))
    interval = check.integer(f"{key}.scrapeIntervalSeconds", get(settings, "scrapeIntervalSeconds"),
                             1, 300, default=30)
    if mode == "bundled":
        return Prometheus(
            mode=mode, scrape_interval_seconds=interval,
            image=check.text(f"{key}.image", get(settings, "image"),
                             lambda v: None if image_pin_problem(v) else v,
                             "a pinned Prometheus image: a version tag (not latest) or an"
                             " @sha256 digest"),
            port=check.port(f"{key}.port", get(settings, "port"), default=9090),
            retention=check.pattern(f"{key}.retention", get(settings, "retention"), _RETENTION,
                                    "a duration in hours, days, weeks or years, e.g. 15d",
                                    default="15d"),
            api_server=None if get(settings, "apiServer") is MISSING else check.text(
                f"{key}.apiServer", get(settings, "apiServer"), _api_server, API_SERVER_TEXT))
    labels = get(settings, "selectorLabels")
    if labels is MISSING:
        labels = {}
    elif not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and _LABEL_KEY.fullmatch(k) and isinstance(v, str)
            and _LABEL_VALUE.fullmatch(v) for k, v in labels.items()):
        check.fail(f"{key}.selectorLabels", labels,
                   "a map of Kubernetes labels (name: value) the Operator's selectors match")
        labels = {}
    return Prometheus(mode=mode, scrape_interval_seconds=interval, selector_labels=dict(labels))


_POLICY_KEYS = ("alpha", "candidatePassRateMin", "toolCallPassRateMin", "toolCallSamples",
                "concurrency", "ttftP95Seconds", "itlP95Seconds", "tasks", "trace")


def _project_file(check: Checker, key: str, value: Any, what: str) -> bytes | None:
    """The bytes of a file the stack names by its path in the project (relative_subdir)."""
    path = check.text(key, value, relative_subdir, f"{what}: a path inside the project")
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as error:
        check.fail(key, value, f"{what}: a readable file ({error.strerror})")
        return None


def gate_policy(check: Checker, key: str, value: Any) -> tuple[rollout_gate.Policy, bytes,
                                                                tuple[rollout_gate.Task, ...], bytes] | None:
    """The stack's gate policy, its task set (bytes and tasks) and its trace's bytes (scripts/gate
    reads it too)."""
    start = check.mark()
    policy = check.obj(key, value, _POLICY_KEYS)
    if policy is None:
        return None
    tasks_file = _project_file(check, f"{key}.tasks", get(policy, "tasks"),
                               "the paired eval's task set (JSON lines, spear/rollout_gate.py)")
    trace_file = _project_file(check, f"{key}.trace", get(policy, "trace"),
                               "the latency step's replay trace (spear/trace.py)")
    tasks: tuple[rollout_gate.Task, ...] = ()
    if tasks_file is not None:
        tasks, problems = rollout_gate.parse_tasks(tasks_file)
        for problem in problems:
            check.fail(f"{key}.tasks", get(policy, "tasks"), f"a task set ({problem})")
    if trace_file is not None:
        try:
            trace.parse(json.loads(trace_file))
        except ValueError as error:
            check.fail(f"{key}.trace", get(policy, "trace"), f"a replay trace ({error})")
    result = rollout_gate.Policy(
        alpha=check.number(f"{key}.alpha", get(policy, "alpha"), 0, 0.5, default=0.05, lo_open=True),
        candidate_pass_rate_min=check.number(f"{key}.candidatePassRateMin",
                                             get(policy, "candidatePassRateMin"), 0, 1, default=0.9),
        tool_call_pass_rate_min=check.number(f"{key}.toolCallPassRateMin",
                                             get(policy, "toolCallPassRateMin"), 0, 1, default=1.0),
        tool_call_samples=check.integer(f"{key}.toolCallSamples", get(policy, "toolCallSamples"),
                                        rollout_gate.MIN_TOOL_CALL_SAMPLES, default=200),
        concurrency=check.integer(f"{key}.concurrency", get(policy, "concurrency"), 1, 256, default=4),
        ttft_p95_seconds=check.number(f"{key}.ttftP95Seconds", get(policy, "ttftP95Seconds"), 0,
                                      default=2.0, lo_open=True),
        itl_p95_seconds=check.number(f"{key}.itlP95Seconds", get(policy, "itlP95Seconds"), 0,
                                     default=0.1, lo_open=True),
        tasks_sha256=rollout_gate.sha256(tasks_file or b""),
        trace_sha256=rollout_gate.sha256(trace_file or b""),
    )
    return (result, tasks_file, tasks, trace_file) if check.clean_since(start) else None


def _gate(check: Checker, key: str, value: Any, receipt_key: bytes | None) -> RolloutGate | None:
    """The stack's gate policy and the records gate runs wrote into its records folder, each
    judged against its evidence (spear/rollout_gate.py::judge, as scripts/gate judges it). A
    record that does not stand is no config error: it blocks only the promotion to its pair."""
    start = check.mark()
    gate = check.obj(key, value, ("policy", "records", "keys"), required=False)
    if not gate:
        return None
    found = gate_policy(check, f"{key}.policy", get(gate, "policy"))
    folder = check.text(f"{key}.records", get(gate, "records"), relative_subdir,
                        "the folder, inside the project, that scripts/gate writes records into")
    keys = check.obj(f"{key}.keys", get(gate, "keys"), (STABLE, CANARY), required=False)
    gate_keys = {track: check.pattern(f"{key}.keys.{track}", get(keys or {}, track), NAME,
                                      "a developer of the stack (its key is the gate's)")
                 for track in (STABLE, CANARY) if get(keys or {}, track) is not MISSING}
    if found is None or folder is None:
        return None
    policy, tasks_file, tasks, _ = found
    raw: dict[str, Any] = {}
    evidence: dict[str, bytes] = {}
    records, refused = [], []
    for path in sorted(Path(folder).glob("*.json")):
        name = path.stem
        try:
            raw[name] = json.loads(path.read_bytes())
            file = raw[name]["evidence"]["file"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            refused.append(rollout_gate.Refused(name, None, (f"not a record scripts/gate wrote ({error})",)))
            continue
        if not isinstance(file, str) or relative_subdir(file) != file or "/" in file:
            refused.append(rollout_gate.Refused(name, rollout_gate.claimed_pair(raw[name]), (
                f"evidence.file: {show(file)} is not a file name in the records folder",)))
            continue
        with contextlib.suppress(OSError):
            evidence[name] = (path.parent / file).read_bytes()
        verdict = rollout_gate.judge(name, raw[name], evidence.get(name), tasks, policy, receipt_key)
        (records if isinstance(verdict, rollout_gate.Record) else refused).append(verdict)
    if not check.clean_since(start):
        return None
    return RolloutGate(policy=policy, records=tuple(records), refused=tuple(refused), written=raw,
                       evidence=evidence, tasks=tasks_file, keys=gate_keys)


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
