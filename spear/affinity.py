"""Which pod of a fleet track serves a `coder` request (gateway.coder.fleetRouting
`prefix-affinity`): the pod that holds its conversation's prefix, unless that pod is busy.

Why: vLLM keeps each prompt's KV blocks on the pod that computed them (its prefix cache, salted
per tenant with cache_salt). A coding agent's turns share everything up to the last message (the
system prompt, the tool list, the repository map, the conversation so far), so a turn landing on
the pod of the previous turn prefills only what is new; through the track's Service, kube-proxy
picks a pod at random and the other pods compute the whole prefix again.

How: rendezvous hashing (highest random weight) of the request's session key over the track's
ready pods, bounded by load (Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing with Bounded
Loads", 2017): a pod takes the request only while it serves fewer than LOAD_FACTOR times the
mean in flight (rounded up), else the next pod in the key's order does. Rendezvous rather than a
ring because a pod that leaves moves only its own sessions, each to its next pod, with no virtual
nodes to tune. Pure and standard library only: the gateway's hook (hosts/gateway/spear_gateway/
pods.py) ships it beside itself and gives it the pods and their loads.

Why not an existing router: llm-d's endpoint picker and vLLM production-stack's router are
proxies of their own between LiteLLM and the pods (another hop and service to run, its own
discovery), and neither is installable here; the pick itself is this file.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# A pod takes a request while its load is below this many times the mean (the paper's 1 + eps):
# 1.25 keeps most turns on their pod and no pod above 125% of its share.
LOAD_FACTOR = 1.25


def session_key(salt: str, messages: Any) -> str:
    """The conversation a request continues: the tenant's cache salt and every message up to
    and including the first user message (the head every later turn of it repeats). Two
    tenants' requests never share a key; one tenant's sessions spread by their first ask."""
    head: list[Any] = []
    for message in messages if isinstance(messages, list) else []:
        head.append(message)
        if isinstance(message, Mapping) and message.get("role") == "user":
            break
    text = json.dumps(head, sort_keys=True, default=str)
    return hashlib.sha256(f"{salt}\0{text}".encode()).hexdigest()


def ranked(key: str, pods: Iterable[str]) -> list[str]:
    """The pods in the key's order of preference (rendezvous hashing)."""
    return sorted(pods, key=lambda pod: hashlib.sha256(f"{key}\0{pod}".encode()).digest(),
                  reverse=True)


def capacity(in_flight: int, pods: int, factor: float = LOAD_FACTOR) -> int:
    """The most requests one pod may serve with this request added (at least one)."""
    return max(1, math.ceil(factor * (in_flight + 1) / pods))


def pick(key: str, pods: Sequence[str], load: Mapping[str, int],
         factor: float = LOAD_FACTOR) -> str | None:
    """The pod for a request of `key`: its first pod below capacity; None when no pod is ready."""
    if not pods:
        return None
    cap = capacity(sum(load.get(p, 0) for p in pods), len(pods), factor)
    order = ranked(key, pods)
    return next((pod for pod in order if load.get(pod, 0) < cap), order[0])
