"""How a kind of resource is described to a reviewer: what each of its changes is (a change
class), what it does, and the old -> new lines worth reading.

A descriptor (`Kind`) sits beside the resource's class (`KIND` or `KINDS` in its module) and is
found by review/registry.py; this module is only the vocabulary they share, so a component
imports nothing heavier than it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spear.tokens import ProviderType, Token

CONFIG_ONLY = "config only (restart)"
# An update that restarts nothing by itself: a key, a record, a check run again.
IN_PLACE = "in place (no restart)"
REBUILD = "rebuild"
MODEL_REFETCH = "model re-fetch"
REPLACE = "replace"
DELETE = "delete"
CREATE = "create"
NO_CHANGE = "no change"
# The RunPod endpoint's own: a new pod, a pod reset through the API, vLLM restarted on its pod.
RECREATE_POD = "recreate pod"
RESET_POD = "reset pod"
RESTART_VLLM = "restart vLLM"
# The REDS endpoint's own: its server is checked again, nothing on its host changes.
RECHECK = "re-check"
# The vLLM fleet's Deployments: a new pod template rolls out; a new replica count only scales.
ROLLING_UPDATE = "rolling update"
SCALE = "scale"
# Any host resource: only the way in (the login, the SSH host key the host must present) changed.
RECONNECT = "new way in"
# Most disruptive first: the order of the overall line and of the list.
CLASSES = (DELETE, RECREATE_POD, REPLACE, REBUILD, CREATE, ROLLING_UPDATE, RESET_POD, MODEL_REFETCH,
           RESTART_VLLM, SCALE, CONFIG_ONLY, IN_PLACE, RECHECK, RECONNECT, NO_CHANGE)
# The update classes whose meaning is the kind's own (else OP_MEANING's).
UPDATES = (CONFIG_ONLY, IN_PLACE, MODEL_REFETCH, RECHECK)

# Never shown, whatever they hold (the SSH key, the pickled provider that may embed config, the
# gateway's master key, a developer's virtual key, cluster credentials, a Kubernetes Secret's
# contents).
HIDDEN_INPUTS = frozenset({"connection", "cluster", "__provider", "master_key", "key", "kubeconfig",
                           "stringData"})
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's "known after the update"

# What a change of any kind does, where its descriptor says nothing of its own.
OP_MEANING = {
    REBUILD: "builds llama-server from the new source on the host and points `current` at it"
             " (the previous build stays on the host)",
    REPLACE: "made anew on the host",
    CREATE: "new on the host",
    DELETE: "removed from the host",
    RECREATE_POD: "a new pod is made through the RunPod API (the API cannot change this in place;"
                  " the weights are downloaded again) and vLLM started on it; the old pod is deleted",
    RESET_POD: "updated through the RunPod API, which resets the pod: it restarts on a new SSH port"
               " and vLLM is started there again",
    RESTART_VLLM: "rewrites vLLM's command line (and key file) on the pod and restarts it in tmux;"
                  " the pod is kept",
    ROLLING_UPDATE: "Kubernetes rolls the pods over to the new template one at a time (one extra"
                    " pod, none unavailable); `up` waits until the rollout is Available",
    SCALE: "pods are added or removed; the running ones keep their template",
    RECONNECT: "records how to reach the host from now on (refresh and destroy use it); nothing"
               " is sent to the host",
}
UPDATED_IN_PLACE = "updated in place; nothing is rebuilt"


@dataclass(frozen=True)
class Change:
    """One resource's change, as a descriptor sees it: the engine's op, its class, the inputs
    before and after (empty when there is no such state), the outputs before."""
    op: str
    change: str
    old: Mapping[str, Any]
    new: Mapping[str, Any]
    old_outputs: Mapping[str, Any] = field(default_factory=dict)
    # The stable pair (image tag, revision, replicas) after the update: what a canary tests.
    stable_now: tuple[str, str, Any] | None = None

    @property
    def inputs(self) -> Mapping[str, Any]:
        return self.new or self.old


@dataclass(frozen=True)
class Kind:
    """What one kind of resource is to a reviewer."""
    type: str  # its type token
    # The part's name, or a function of its inputs (a unit is named by its unit).
    name: str | Callable[[Mapping[str, Any]], str]
    # What an update is: a change class, or a function of (old, new) inputs giving one.
    update: str | Callable[[Mapping[str, Any], Mapping[str, Any]], str]
    replace: str = REPLACE  # what a replacement is
    meanings: Mapping[str, str] = field(default_factory=dict)  # change class -> what it does
    # The old -> new lines; by default the inputs that changed (both states needed).
    details: Callable[[Change], list[str]] | None = None
    hidden: frozenset[str] = frozenset()  # inputs never shown, beside HIDDEN_INPUTS
    restarts: bool = False  # a systemd unit: its changes restart a server
    # Its line in the summary's gateway section, if a change of it is one a reviewer looks for.
    gateway_line: Callable[[Change], str | None] | None = None

    @classmethod
    def of(cls, token: Token | ProviderType, name: str | Callable[[Mapping[str, Any]], str],
           update: str | Callable[[Mapping[str, Any], Mapping[str, Any]], str], **more: Any) -> Kind:
        return cls(token.type, name, update, **more)

    def part_name(self, inputs: Mapping[str, Any]) -> str:
        return self.name(inputs) if callable(self.name) else self.name

    def classify(self, op: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
        if op in ("same", "read", "refresh"):
            return NO_CHANGE
        if op in ("create", "import"):
            return CREATE
        if op in ("delete", "discard", "read-discard"):
            return DELETE
        if op == "update":
            return self.update(old, new) if callable(self.update) else self.update
        # replace, create-replacement, delete-replaced, read-replacement: made anew.
        return self.replace

    def meaning(self, change: str) -> str:
        if change in self.meanings:
            return self.meanings[change]
        return UPDATED_IN_PLACE if change in UPDATES else OP_MEANING.get(change, "")

    def lines(self, change: Change) -> list[str]:
        if self.details:
            return self.details(change)
        return changed_lines(change.old, change.new, self.hidden) if change.old and change.new else []


def updates_only(details: Callable[[Change], list[str]]) -> Callable[[Change], list[str]]:
    """Details that compare the two states: none when the change has only one (a create, a
    delete)."""
    return lambda change: details(change) if change.old and change.new else []


def show(value: Any) -> str:
    if value == UNKNOWN:
        return "(known after the update)"
    if value is None:
        return "(unset)"
    return f"`{value}`"


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any],
                 hidden: frozenset[str] = frozenset()) -> list[str]:
    hidden = HIDDEN_INPUTS | hidden
    return sorted(k for k in set(old) | set(new) if k not in hidden and old.get(k) != new.get(k))


def changed_lines(old: Mapping[str, Any], new: Mapping[str, Any],
                  hidden: frozenset[str] = frozenset()) -> list[str]:
    return [f"`{k}` changed" for k in changed_keys(old, new, hidden)]


def mapping_details(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return [f"`{k}`: {show(old.get(k))} → {show(new.get(k))}" for k in changed_keys(old, new)]


def count(value: Any) -> str:
    return str(int(value)) if isinstance(value, (int, float)) else str(value)
