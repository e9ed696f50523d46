"""A developer's virtual key on the gateway, as a resource on LiteLLM's key API
(/work/shared/contracts/litellm-key-api.md), reached through the gateway host's SSH login or, for
a gateway in the cluster, the API server's proxy to its Service (components/hostops/kube_api.py).

create = /key/generate; a budget, model or limit change = /key/update in place (the developer
keeps the key); read = /key/info (refresh shows spend, and a budget changed by hand in the
admin UI as drift); delete = /key/delete (a developer removed from the stack loses access on the
next `up`). Rotation is explicit: bumping `rotation` makes a new key under the developer's alias
and leaves the old one working for the grace period (`/key/regenerate` does this in one call,
but LiteLLM reserves it for its paid edition: HTTP 500 on 1.91.1 without a licence). The new key
carries the old one's spend, so a rotation never resets a budget.

LiteLLM leaves the old spend in place when `budget_duration` changes (BerriAI/litellm #34270,
#34492), so the key could be over budget at once; a window change here also zeroes the spend.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.kube_api import vantage
from components.hostops.ssh import NoAnswer, RemoteError, bearer_headers
from config.types import Developer
from review.kinds import CREATE, DELETE, IN_PLACE, REPLACE, Change, Kind, show, updates_only
from spear import tokens

# What /key/update changes in place (stack field -> LiteLLM field).
UPDATABLE = {
    "models": "models",
    "max_budget": "max_budget",
    "budget_duration": "budget_duration",
    "tpm_limit": "tpm_limit",
    "rpm_limit": "rpm_limit",
    "max_parallel_requests": "max_parallel_requests",
    "metadata": "metadata",
}


def key_metadata(developer: Developer) -> dict[str, str]:
    """The key's metadata: the stack's, plus who it belongs to and what the gateway stamps on its
    requests (the hooks and spend logs use it; hosts/gateway/spear_gateway/tenancy.py)."""
    return {**developer.metadata, "developer": developer.name,
            **({"team": developer.team} if developer.team else {}),
            "ring": developer.ring, "priority": developer.priority}


@dataclass
class GatewayKeyArgs:
    connection: pulumi.Input[dict] | None  # the gateway host's SSH login (secret)
    address: str  # where the proxy listens on the gateway host
    port: int
    master_key: pulumi.Input[str]  # secret
    developer: Developer
    # Changes when the proxy was (re)installed: a new database means the key must be made again.
    database: pulumi.Input[str]
    cluster: pulumi.Input[dict] | None = None  # instead of connection: the gateway's Service


class KeyApi:
    """LiteLLM's key endpoints on the gateway, with the master key."""

    def __init__(self, props: dict[str, Any]) -> None:
        self.props = props

    def call(self, method: str, path: str, body: dict | None = None,
             ok: tuple[int, ...] = (200,)) -> tuple[int, dict]:
        with vantage(self.props) as host:
            status, raw = host.http(int(self.props["port"]), method, path,
                                    json.dumps(body).encode() if body is not None else b"",
                                    address=self.props["address"], timeout=60,
                                    headers={**bearer_headers(self.props["master_key"]),
                                             "Content-Type": "application/json"})
        if status not in ok:
            # The body may echo the request's key: say only the status and LiteLLM's error type
            # (and what a new key's refusal says: that request holds no key).
            said = f": {_error_message(raw)}" if path == "/key/generate" else ""
            raise RemoteError(f"gateway {method} {path}: HTTP {status} ({_error_type(raw)}){said}")
        return status, json.loads(raw or b"{}")


def _error_message(raw: bytes) -> str:
    try:
        return str(json.loads(raw).get("error", {}).get("message", ""))[:300]
    except (ValueError, AttributeError):
        return raw[:300].decode(errors="replace")


def _error_type(raw: bytes) -> str:
    try:
        error = json.loads(raw).get("error", {})
        return str(error.get("type") or error.get("code") or "no error type")
    except (ValueError, AttributeError):
        return "not JSON"


def info_path(key: str) -> str:
    """/key/info for a key, by its hash: a URL lands in the proxy's access log (the journal),
    and LiteLLM looks a key up by its SHA-256 either way (it hashes only values that start with
    sk-), so the key itself never travels in a URL."""
    return f"/key/info?key={hashlib.sha256(key.encode()).hexdigest()}"


def _fields(props: dict[str, Any]) -> dict[str, Any]:
    return {litellm: props[field] for field, litellm in UPDATABLE.items()
            if props.get(field) is not None}


class GatewayKeyProvider(HostProvider):
    replace_fields = ("key_alias", "database")
    update_fields = (*UPDATABLE, "rotation", "rotation_grace")
    delete_before_replace = True  # the old key goes before its replacement is made

    def resource_id(self, props: dict[str, Any]) -> str:
        return props["key_alias"]

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        api = KeyApi(props)
        if olds is None:
            _, made = api.call("POST", "/key/generate",
                               {"key_alias": props["key_alias"], **_fields(props)})
            key = made["key"]
        else:
            key = olds["key"]
            changed = {litellm: props.get(field) for field, litellm in UPDATABLE.items()
                       if olds.get(field) != props.get(field)}
            if changed:
                if "budget_duration" in changed:
                    changed["spend"] = 0.0  # LiteLLM #34270: a new window starts unspent
                api.call("POST", "/key/update", {"key": key, **changed})
            if olds.get("rotation") != props.get("rotation"):
                key = self._rotate(api, key, props, olds)
        return {**props, "key": key, **self._info(api, key)}

    @staticmethod
    def _rotate(api: KeyApi, key: str, props: dict[str, Any], olds: dict[str, Any]) -> str:
        """A new key under the alias; the old one renamed and expiring after the grace period."""
        spend = float(api.call("GET", info_path(key))[1].get("info", {}).get("spend") or 0)
        api.call("POST", "/key/update", {
            "key": key, "key_alias": f"{props['key_alias']}-rotation-{olds.get('rotation')}",
            "duration": props["rotation_grace"]})
        _, made = api.call("POST", "/key/generate", {"key_alias": props["key_alias"],
                                                     **_fields(props), "spend": spend})
        return made["key"]

    @staticmethod
    def _info(api: KeyApi, key: str) -> dict[str, Any]:
        _, answer = api.call("GET", info_path(key))
        info = answer.get("info", {})
        return {"spend": float(info.get("spend") or 0.0),
                "budget_reset_at": info.get("budget_reset_at")}

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        api = KeyApi(props)
        try:
            status, answer = api.call("GET", info_path(props["key"]), ok=(200, 404))
        except NoAnswer:
            # The proxy is down (a re-created host, a restart): nothing to compare with. The
            # record stands; the next `up` starts the proxy, and a new database (its `database`
            # input) re-creates the key.
            return ReadResult(id_=id_, outs=dict(props))
        info = answer.get("info") or {}
        # 1.91.1 answers 404 for a deleted key, 1.108.7 200 with status "deleted".
        if status == 404 or info.get("status") == "deleted":
            return ReadResult(id_=None, outs={})
        seen = {field: info.get(litellm) for field, litellm in UPDATABLE.items()
                if litellm in info}
        if "metadata" in seen:
            seen["metadata"] = {k: v for k, v in (seen["metadata"] or {}).items()
                                if k in (props.get("metadata") or {})}
        return ReadResult(id_=id_, outs={**props, **seen,
                                         "spend": float(info.get("spend") or 0.0),
                                         "budget_reset_at": info.get("budget_reset_at")})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        KeyApi(props).call("POST", "/key/delete", {"keys": [props["key"]]}, ok=(200, 404))


def _usd(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else show(value)


def key_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """What an in-place update of a developer's key changes, for a reviewer; never the key."""
    developer = new.get("developer") or old.get("developer")
    changes = []
    (old_max, old_window), (new_max, new_window) = (
        (s.get("max_budget"), s.get("budget_duration")) for s in (old, new))
    if old_window != new_window:
        changes.append(f"budget {_usd(old_max)} USD / {old_window} -> {_usd(new_max)} USD /"
                       f" {new_window} (the new window starts unspent)")
    elif old_max != new_max:
        changes.append(f"budget {_usd(old_max)} -> {_usd(new_max)} USD / {new_window}")
    if old.get("models") != new.get("models"):
        changes.append(f"models {', '.join(old.get('models') or [])} -> "
                       f"{', '.join(new.get('models') or [])}")
    changes += [f"{limit} {_usd(old.get(limit))} -> {_usd(new.get(limit))}"
                for limit in ("tpm_limit", "rpm_limit", "max_parallel_requests")
                if old.get(limit) != new.get(limit)]
    if old.get("metadata") != new.get("metadata"):
        changes.append("metadata changed")
    if old.get("rotation") != new.get("rotation"):
        changes.append(f"key rotated (the old one works for {new.get('rotation_grace')})")
    return f"{developer}: {'; '.join(changes) or 'refreshed'} (in place)"


def _key_line(change: Change) -> str:
    developer = change.inputs.get("developer")
    return {CREATE: f"{developer}: new key", DELETE: f"{developer}: key revoked",
            REPLACE: f"{developer}: new key (the old one is deleted)"}.get(
                change.change) or key_change(change.old, change.new)


KIND = Kind.of(tokens.GATEWAY_KEY, "developer key", IN_PLACE,
               details=updates_only(lambda change: [key_change(change.old, change.new)]),
               gateway_line=_key_line, meanings={
    IN_PLACE: "updated in place through /key/update: the developer keeps the key",
    CREATE: "a new virtual key (/key/generate)",
    DELETE: "the key is deleted (/key/delete): its developer loses access",
    REPLACE: "a new virtual key: the old one is deleted",
})

class GatewayKey(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.GATEWAY_KEY.name):
    key: pulumi.Output[str]
    spend: pulumi.Output[float]
    budget_reset_at: pulumi.Output[str]

    def __init__(self, name: str, args: GatewayKeyArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        dev = args.developer
        super().__init__(GatewayKeyProvider(), name, {
            "connection": args.connection,
            **({"cluster": args.cluster} if args.cluster else {}),
            "address": args.address,
            "port": args.port,
            "master_key": args.master_key,
            "database": args.database,
            "developer": dev.name,
            "key_alias": dev.name,
            "models": list(dev.models),
            "max_budget": dev.max_budget,
            "budget_duration": dev.budget_duration,
            "tpm_limit": dev.tpm_limit,
            "rpm_limit": dev.rpm_limit,
            "max_parallel_requests": dev.max_parallel_requests,
            "metadata": key_metadata(dev),
            "rotation": dev.rotation,
            "rotation_grace": dev.rotation_grace,
        }, opts, outputs=("key", "spend", "budget_reset_at"),
            secret_inputs=("master_key", "key"))
