"""Who a `coder` request belongs to, and what the gateway therefore stamps on it (seed 001, "How
to run it in production"): its cache_salt, its priority, and the ring of deployments it may
reach. Pure: litellm_hooks.py reads the key and the deployment and calls these.

cache_salt. vLLM folds it into the prefix cache's block hashes, so requests with different salts
never share cached blocks: one salt per team (scope `team`; a developer without a team is a
team of one) or per developer (scope `developer`). It is a digest of a fixed prefix, the scope's
kind and the name: the same on every replica and after every restart (the cache stays warm),
and two tenants never share one (the kind is hashed too, so team `ana` and developer `ana`
differ). It need not be secret: the gateway overwrites whatever a client sends, so knowing
another team's salt lets nobody into that team's cache.

priority. vLLM with `--scheduling-policy priority` serves lower values first. The key's class
gives the value (interactive 0, background 10); a request may lower its own priority (ask a
larger integer) but never raise it (a smaller one gets the class's). A value that is not an
integer, or beyond a 32-bit signed integer, is refused at admission (HTTP 400): ignoring it
would leave the developer believing the ask took effect, and the engine must never be handed
a value it might fail on (a 5xx would escalate to the hatch).

Rings. A `pilot` key reaches only the fleet's canary deployments while any is available (else
the others); every other key, the master key included, never reaches a canary.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The values the stack config allows: one home, spear/rules.py, shipped beside the hooks.
from spear.rules import (CACHE_SALT_SCOPES, DEFAULT_PRIORITY_CLASS, GENERAL_RING, RINGS,
                         PRIORITY_CLASSES, ring_members)

PRIORITY_LIMIT = 2**31  # |priority| below it
# The deployment's model_info fields (components/gateway/render.py writes them).
TRACK = "spear_track"  # its value: spear.fleet.STABLE or CANARY
TAKES_CACHE_SALT, TAKES_PRIORITY = "spear_cache_salt", "spear_priority"
# What the gateway owns in a request body; a client's copy never reaches a deployment as sent.
OWNED_FIELDS = ("cache_salt", "priority")
_SALT_PREFIX = b"spear-fleet cache_salt v1"


class BadPriority(ValueError):
    """A client's `priority` that is not an integer of magnitude below 2**31."""


@dataclass(frozen=True)
class Tenant:
    """A key's owner as its metadata says (components/gateway/keys.py key_metadata)."""

    key: str  # the key's hash, or "master-key"
    developer: str | None = None
    team: str | None = None
    ring: str = GENERAL_RING
    priority_class: str = DEFAULT_PRIORITY_CLASS

    @classmethod
    def of(cls, key: str, metadata: Mapping[str, Any] | None) -> Tenant:
        """A value outside what the config allows (a key edited by hand) counts as the default:
        never the canary, never a raised priority."""
        meta = metadata or {}
        text = {k: v for k in ("developer", "team", "ring", "priority")
                if isinstance(v := meta.get(k), str) and v}
        return cls(key=key, developer=text.get("developer"), team=text.get("team"),
                   ring=text["ring"] if text.get("ring") in RINGS else GENERAL_RING,
                   priority_class=text.get("priority") if text.get("priority") in PRIORITY_CLASSES
                   else DEFAULT_PRIORITY_CLASS)

    def cache_salt(self, scope: str) -> str:
        if scope not in CACHE_SALT_SCOPES:
            raise ValueError(f"cache_salt scope {scope!r}: allowed are {CACHE_SALT_SCOPES}")
        if scope == "team" and self.team:
            kind, name = "team", self.team
        elif self.developer:
            kind, name = "developer", self.developer
        else:  # a key with no owner (the master key): a tenant of its own
            kind, name = "key", self.key
        return hashlib.sha256(b"\0".join((_SALT_PREFIX, kind.encode(), name.encode()))).hexdigest()

    def priority(self, asked: Any = None) -> int:
        """The priority a request of this key runs at, given what the client asked (None: no ask)."""
        floor = PRIORITY_CLASSES[self.priority_class]
        if asked is None:
            return floor
        if type(asked) is not int or not -PRIORITY_LIMIT < asked < PRIORITY_LIMIT:
            raise BadPriority(
                f"priority={asked!r}: allowed is an integer of magnitude below 2**31 (this"
                f" key's {self.priority_class} class runs at {floor}: a larger value serves the"
                f" request later, a smaller one counts as {floor})")
        return max(floor, asked)


def ring_deployments(ring: str, deployments: list[Any]) -> list[Any]:
    """The fleet's deployments a request of `ring` may reach, from those LiteLLM found healthy."""
    return ring_members(ring, deployments, lambda d: model_info(d).get(TRACK))


def model_info(deployment: Any) -> Mapping[str, Any]:
    """A deployment's model_info: a dict on 1.91.1 and 1.108.7, a pydantic model elsewhere."""
    info = deployment.get("model_info") if isinstance(deployment, Mapping) else getattr(
        deployment, "model_info", None)
    if hasattr(info, "model_dump"):
        info = info.model_dump()
    return info if isinstance(info, Mapping) else {}


def take_owned(request: dict[str, Any]) -> Any:
    """Remove the owned fields from a request, at its top level and in `extra_body` (which the
    OpenAI client merges into the body); the `priority` the client asked at the top level."""
    asked = request.get("priority")
    for body in (request, request.get("extra_body")):
        if isinstance(body, dict):
            for name in OWNED_FIELDS:
                body.pop(name, None)
    return asked


def stamp(request: dict[str, Any], info: Mapping[str, Any], salt: str, priority: int) -> None:
    """The owned fields on the request LiteLLM sends to the deployment described by `info`:
    the gateway's where the deployment takes them, none anywhere else."""
    take_owned(request)
    for name, takes, value in (("cache_salt", TAKES_CACHE_SALT, salt),
                               ("priority", TAKES_PRIORITY, priority)):
        if info.get(takes) is True:
            request[name] = value
