"""The seed rules' shared facts: one home for each constant and predicate that the config
checker, the components, the policy pack and the scripts all need (docs/RULES.md says which
rule lives where).

Pure Python with no dependencies, so the policy pack's own virtualenv can import it too.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, TypeVar

T = TypeVar("T")

# Seed 001 "How to develop with it": a pin is content, never a name that moves. Git prints
# commit ids in lowercase, and the build compares the checked-out HEAD with the pin as text.
COMMIT = re.compile(r"[0-9a-f]{40}")
COMMIT_TEXT = ("a commit id of 40 lowercase hex characters (a branch or tag name is refused: it"
               " moves, and a build must not)")
SHA256 = re.compile(r"[0-9a-fA-F]{64}")
SHA256_TEXT = "64 hex characters (a sha256 digest)"

# Seed 001 "How to maintain it": the engine version is part of the pin, so an image names a
# version tag (never `latest`) or an @sha256 digest. [registry[:port]/]name[:tag][@sha256:digest]
IMAGE = re.compile(r"(?P<repository>(?:[a-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9][a-z0-9._/-]*)"
                   r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?")
IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
UNPINNED_TAG = "latest"

# Seed 000 §6.2.6: the server is a system unit in system.slice; tool sandboxes run in scopes
# under user.slice, so no limit or OOM kill in a tool call can reach the model server.
SYSTEM_UNIT_DIR = "/etc/systemd/system"
SYSTEM_SLICE = "system.slice"
INFERENCE_UNIT = "spear-inference.service"

# Seed 000 §6.2.11: the smoke test's expected answer.
SMOKE_ANSWER = "SPEAR-BACKEND-OK"


def is_commit(value: object) -> bool:
    return isinstance(value, str) and COMMIT.fullmatch(value) is not None


def is_sha256(value: object) -> bool:
    return isinstance(value, str) and SHA256.fullmatch(value) is not None


def image_pin_problem(image: object) -> str | None:
    """Why an image reference does not pin the engine; None when it does (a version tag, or a
    digest)."""
    match = IMAGE.fullmatch(image) if isinstance(image, str) else None
    if match is None:
        return f"{image!r} is not an image reference"
    if match["digest"]:
        return None
    if not match["tag"]:
        return f"{image!r} has no tag (it means :latest)"
    if match["tag"] == UNPINNED_TAG:
        return f"{image!r} is tagged :latest, which moves"
    return None


# SSH host keys (seed 000 §6.2: the fleet's secrets go to hosts over SSH, so only to the host
# whose key is known): what ssh.hostKey may hold.
HOST_KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                  "ecdsa-sha2-nistp521", "ssh-rsa")
HOST_KEY_TEXT = ("a known_hosts line or its key part, `<type> <base64>` (type one of "
                 + ", ".join(HOST_KEY_TYPES) + "), e.g. a line of `ssh-keyscan <host>`")


# The dumps hosts/gateway/backup-database.sh writes (gateway.database.restoreFrom names one).
BACKUP_DUMP = re.compile(r"litellm-[0-9]{8}T[0-9]{6}Z\.dump")
BACKUP_DUMP_TEXT = "a dump's file name in gateway.database.backup.folder (litellm-<YYYYMMDD>T<HHMMSS>Z.dump)"


def host_key_normal(text: object) -> str | None:
    """`<type> <base64>` of a host key given as a known_hosts line ("[host]:port type base64
    [comment]") or its key part; None when it is neither (the base64 must hold a key of that
    type: SSH's wire form starts with the type's name)."""
    words = text.split() if isinstance(text, str) else []
    for start in (0, 1):  # without or with the host field
        if len(words) >= start + 2 and words[start] in HOST_KEY_TYPES:
            kind, data = words[start], words[start + 1]
            try:
                blob = base64.b64decode(data, validate=True)
            except ValueError:
                return None
            length = int.from_bytes(blob[:4], "big")
            return f"{kind} {data}" if blob[4:4 + length] == kind.encode() else None
    return None


def is_loopback(host: object) -> bool:
    """True for an address only this machine can reach: 127.0.0.0/8, ::1, localhost.

    Seed 000 §6.2: llama-server listens on loopback only; and a host reached over SSH on a
    loopback address is this machine, whose ports the client side shares.
    """
    if not isinstance(host, str):
        return False
    host = host.strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# Seed 000 §6.2.7: one port on one machine has one owner. A host reached on a loopback address
# is this machine, whose ports the client's backends (their tunnels' client ports) take too.
THIS_MACHINE = "this machine"


def port_clashes(binds: Iterable[tuple[str, int, T]]) -> dict[tuple[str, int], list[T]]:
    """The ports more than one binder takes, by (machine, port), each with its binders in order.
    A bind is (host, port, binder); a loopback host's machine is THIS_MACHINE."""
    taken: dict[tuple[str, int], list[T]] = {}
    for host, port, binder in binds:
        taken.setdefault((THIS_MACHINE if is_loopback(host) else host, port), []).append(binder)
    return {where: binders for where, binders in taken.items() if len(binders) > 1}


def cgroup_line(slice_name: str, unit: str) -> str:
    """The unified-hierarchy line of /proc/<pid>/cgroup for a process of `unit` in `slice_name`."""
    return f"0::/{slice_name}/{unit}"


# Seed 001 step 5: the gateway. Developers only ever ask for `coder`; `frontier` is the hatch,
# reached by escalation alone, and only when the fleet answered 429 or 5xx (or not at all): a
# client error that escalated would burn frontier budget on every retry.
GATEWAY_UNIT = "spear-gateway.service"
CODER_MODEL = "coder"
FRONTIER_MODEL = "frontier"
GATEWAY_MODELS = (CODER_MODEL, FRONTIER_MODEL)
# The hook LiteLLM loads from config.yaml (hosts/gateway/spear_gateway) that classifies the
# fleet's failure, escalates, and holds budgets.
HATCH_CALLBACK = "spear_gateway.callbacks.proxy_handler_instance"
# The hook that signs an answer asked for a receipt (spear/receipts.py), for the rollout gate.
# Its own module, so a proxy loads it without the hatch's settings (the gate's test proxy does).
RECEIPT_CALLBACK = "spear_gateway.receipts.receipt_signer"
# Where harnesses send their OpenTelemetry metrics (OTLP/HTTP JSON) on the gateway's own port,
# authenticated by the developer's key: the edit decisions behind diff acceptance
# (hosts/gateway/spear_gateway/edits.py; the wiring in spear/harness.py). No "/metrics" in it:
# LiteLLM's PrometheusAuthMiddleware admits only the master key to any path that holds it.
HARNESS_METRICS_PATH = "/spear/harness-telemetry"
# gateway.listen.tls: the unit tells the hooks' HTTPS listener (hosts/gateway/spear_gateway/
# tls_listener.py) where to listen (address:port) and which certificate bundle and key to serve.
TLS_LISTEN_ENV = "SPEAR_TLS_LISTEN"
TLS_CERTIFICATE_ENV = "SPEAR_TLS_CERTIFICATE_FILE"
TLS_KEY_ENV = "SPEAR_TLS_KEY_FILE"
# The name `gateway.coder.upstreams` gives the Kubernetes fleet (its tracks are routes
# vllm-stable and vllm-canary).
FLEET_UPSTREAM = "vllmFleet"


def escalates(status: int | None) -> bool:
    """Whether the fleet's failure may use the hatch: 429, any 5xx, or no answer (None)."""
    return status is None or status == 429 or 500 <= status <= 599


def tunnel_unit(endpoint: str) -> str:
    """The gateway host's SSH tunnel unit to an endpoint."""
    return f"spear-tunnel-{endpoint}.service"


# Seed 001 "Budget hygiene": a developer's budget resets every window; LiteLLM's durations.
BUDGET_DURATION = re.compile(r"[1-9][0-9]{0,3}(s|m|h|d|mo)")
BUDGET_DURATION_TEXT = 'a window like "30s", "30m", "24h", "30d" or "1mo"'


class KeyProblem(NamedTuple):
    """One way a developer's key breaks the budget rules."""
    field: str  # budget_duration, max_budget or models
    why: str
    positions: tuple[int, ...] = ()  # the names in models at fault; () for the whole field


def developer_key_problems(models: object, max_budget: object,
                           budget_duration: object) -> list[KeyProblem]:
    """Why a developer's key breaks the budget rules (empty when it does not). The config check
    reports each at its field (a model at its position), the policy says why."""
    problems = []
    if not isinstance(budget_duration, str) or not BUDGET_DURATION.fullmatch(budget_duration):
        problems.append(KeyProblem("budget_duration", "no budget_duration: the budget never"
                                   " resets and locks the developer out"))
    # `not 0 < x < inf` also refuses NaN, which every comparison answers False.
    if isinstance(max_budget, bool) or not isinstance(max_budget, (int, float)) \
            or not 0 < max_budget < math.inf:
        problems.append(KeyProblem("max_budget", "max_budget is not a finite amount greater than 0"))
    if not isinstance(models, list) or not models:
        problems.append(KeyProblem("models", "no models"))
        return problems
    frontier = tuple(i for i, m in enumerate(models) if m == FRONTIER_MODEL)
    if frontier:
        problems.append(KeyProblem("models", f"{FRONTIER_MODEL} given directly: it is the hatch,"
                                   " reached by escalation only", frontier))
    unknown = tuple(i for i, m in enumerate(models) if m not in GATEWAY_MODELS)
    if unknown:
        problems.append(KeyProblem("models", f"models {[models[i] for i in unknown]} are not the"
                                   f" gateway's ({', '.join(GATEWAY_MODELS)})", unknown))
    return problems


def alert_below_cap(alert_usd: object, monthly_cap_usd: object) -> bool:
    """Whether the hatch's spend alert fires before its monthly cap shuts it: 0 < alert < cap."""
    amounts = (alert_usd, monthly_cap_usd)
    return all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in amounts) \
        and 0 < alert_usd < monthly_cap_usd


# --- Tenancy (seed 001 "How to run it in production", "How to maintain it"): what the gateway
# stamps on a developer's requests and which of the fleet's tracks they reach. Config allows
# these values, the hooks on the gateway host act on them (spear_gateway/tenancy.py).
# `stable`: the fleet's stable track alone, whatever else serves `coder` (an inference host, a
# pod), so the rollout gate's stable key measures the pair its record pins.
RINGS = ("pilot", "general", "stable")
PILOT_RING, GENERAL_RING, STABLE_RING = RINGS
# vLLM with --scheduling-policy priority serves lower values first.
PRIORITY_CLASSES = {"interactive": 0, "background": 10}
DEFAULT_PRIORITY_CLASS = "interactive"
CACHE_SALT_SCOPES = ("team", "developer")
# How the gateway picks a pod of a fleet track (gateway.coder.fleetRouting; spear/affinity.py).
PREFIX_AFFINITY, SERVICE_SPREAD = "prefix-affinity", "service"
FLEET_ROUTINGS = (PREFIX_AFFINITY, SERVICE_SPREAD)
STABLE_TRACK, CANARY_TRACK = "stable", "canary"


def ring_members(ring: object, items: Sequence[T], track_of: Callable[[T], object]) -> list[T]:
    """What a key of `ring` reaches of `items` (routes, or LiteLLM's deployments), each on a fleet
    track or none: the pilot ring only the canary's while there is one, the stable ring only the
    stable track's, everyone else never the canary's. The hook routes by it; the gateway's smoke
    test expects it."""
    if ring == STABLE_RING:
        return [item for item in items if track_of(item) == STABLE_TRACK]
    canary = [item for item in items if track_of(item) == CANARY_TRACK]
    if ring == PILOT_RING and canary:
        return canary
    return [item for item in items if track_of(item) != CANARY_TRACK]


def ring_routes(ring: object, tracks: dict[str, str | None]) -> list[str]:
    """ring_members over routes (route id -> its fleet track, None for other endpoints)."""
    return ring_members(ring, list(tracks), tracks.get)


def served_by_track_alone(ring: object, track: str) -> bool:
    """Whether a key of `ring` is served by the fleet's `track` alone, whatever else `coder`
    routes to: what the gate's keys must be, so each measures its track."""
    return ring_routes(ring, {STABLE_TRACK: STABLE_TRACK, CANARY_TRACK: CANARY_TRACK,
                              "another endpoint": None}) == [track]


# ---------------------------------------------------------------------------------------------
# The agent sandbox's egress (seed 001 step 7): the default-deny is opened only to the gateway
# (its pods in the cluster, its address on a host: taken from `gateway`) and the mirrors, each a
# host or one subnet; a wider network (0.0.0.0/0 at the extreme) would open it to everything.
# No DNS: a resolver that answers anything is a way out (names go through the pod's hosts file).
# The widest network allowed, by IP version.
EGRESS_WIDEST_PREFIX = {4: 24, 6: 64}
EGRESS_NETWORK_TEXT = ("one host or one subnet: an IPv4 network of /24 or narrower, or IPv6 of"
                       " /64 or narrower")


# The in-cluster gateway (components/gateway/cluster_manifests.py): its objects' name, the
# labels its Deployment selects its pods by (which the agent sandbox's egress and the fleet's
# ingress allow, and the reviewer summary and the policies recognise it by), and the annotation
# its ConfigMap carries config.yaml's facts in (render.config_facts, read by policies/common.py).
APP_LABEL = "app.kubernetes.io/name"
GATEWAY_APP = "spear-gateway"
GATEWAY_POD_LABELS = {APP_LABEL: GATEWAY_APP}
GATEWAY_FACTS_ANNOTATION = "spear-fleet/facts"


def pods_peer(namespace: str, labels: dict[str, str]) -> dict[str, object]:
    """The NetworkPolicy destination of exactly the pods with `labels` in `namespace`: the
    in-cluster gateway's. Not its Service's address: a NetworkPolicy sees the pod a Service
    forwards to, so an ipBlock of a cluster IP matches nothing once enforced."""
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "podSelector": {"matchLabels": dict(labels)}}


def egress_network_problem(cidr: object) -> str | None:
    """None when `cidr` is a network the sandbox may reach; else what is wrong with it."""
    try:
        network = ipaddress.ip_network(str(cidr), strict=True)
    except ValueError:
        return f"{cidr!r} is not an IP network"
    widest = EGRESS_WIDEST_PREFIX[network.version]
    if network.prefixlen < widest:
        return (f"{network} is {network.num_addresses} addresses, wider than /{widest}: it would"
                " open the default-deny to far more than the gateway or a mirror")
    return None


# The committed stacks' placeholder secrets are encrypted with this public passphrase
# (scripts/env.sh defaults to it). Only the local stack, whose every secret is a throwaway made
# for this machine, may be deployed under it: anything else would hold real secrets that anyone
# with the repository can decrypt.
EXAMPLE_PASSPHRASE = "spear-fleet-example"
EXAMPLE_PASSPHRASE_STACK = "local"
PASSPHRASE_ENV = "PULUMI_CONFIG_PASSPHRASE"
PASSPHRASE_FILE_ENV = "PULUMI_CONFIG_PASSPHRASE_FILE"


def example_passphrase_refused(stack: str, passphrase: str | None) -> bool:
    """Whether a stack's secrets would be under the public example passphrase where it may not."""
    return passphrase == EXAMPLE_PASSPHRASE and stack != EXAMPLE_PASSPHRASE_STACK
