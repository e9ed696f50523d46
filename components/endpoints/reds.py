"""The REDS endpoint of seed 000 §6.2.7 (`reds`): a stable host whose inference server someone
runs there, reached by the client through an SSH tunnel.

"reds is deliberately not the pod path": spear-fleet installs, uploads and starts nothing on a
REDS host. RedsTunnelCheck logs in, opens a channel to the server's port on the host (what the
client's tunnel does), checks that something answers, and records the model id it advertises;
when nothing answers it says so, and what to do, and the `up` stops with nothing recorded. Then
the cookbook's three probes and the seed's smoke test run through the same login on that id.

An endpoint may instead point at an inference host this stack manages: it is then checked after
that host (its server, smoke test and verification), and again whenever that server restarts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from spear.probes import listed_models
from components.endpoints.proof import EndpointProofArgs, prove_endpoint
from components.endpoints.reach import Reach
from components.hostops.host_key import pinned_connection
from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import NoAnswer, RemoteError, Session, connection_input
from components.inference_host import InferenceHost
from config.types import RedsEndpoint as EndpointConfig
from review.kinds import CREATE, DELETE, RECHECK, Change, Kind, changed_lines
from spear import tokens

CHECK_TIMEOUT = 30.0
NOT_READY = 503  # llama-server's /health while it loads the model


class RedsCheckFailed(RemoteError):
    """The endpoint does not answer as it should; the message says what was seen and what to do."""


def _failed(props: Mapping[str, Any], what: str, advice: str) -> RedsCheckFailed:
    return RedsCheckFailed(f"reds endpoint {props['endpoint']}: {what}. {advice}")


def _server_advice(props: Mapping[str, Any]) -> str:
    """What to do about a server that does not answer, by who runs it."""
    if props.get("managed_by"):
        return (f"It is inferenceHosts.{props['managed_by']}'s server: see its"
                " spear-inference.service (`pulumi refresh` then `pulumi up` restarts it)")
    return (f"Start the inference server on that host yourself (spear-fleet installs nothing on a"
            f" REDS host), or fix redsEndpoints.{props['endpoint']}.port")


def check(props: Mapping[str, Any]) -> list[str]:
    """Logs in, checks the server answers and lists its models; returns the ids it advertises."""
    # Numbers reach a dynamic provider as floats (8010.0).
    port, address = int(props["port"]), props["address"]
    where = f"{address}:{port} on {props['ssh_host']}"
    # Each failure is raised `from None`: its message holds the reason, which a chain of
    # tracebacks in `pulumi up`'s output would only bury.
    try:
        with Session(props["connection"], connect_timeout=CHECK_TIMEOUT) as host:
            health, _ = host.http(port, "GET", "/health", address=address, timeout=CHECK_TIMEOUT)
            status, body = host.http(port, "GET", "/v1/models", address=address,
                                     timeout=CHECK_TIMEOUT)
    except NoAnswer as err:
        raise _failed(props, f"nothing answers on {where} ({err.reason})",
                      _server_advice(props)) from None
    except ConnectionError as err:
        raise _failed(props, str(err), _server_advice(props)) from None
    except RemoteError as err:
        key = (f"inferenceHosts.{props['managed_by']}.ssh" if props.get("managed_by")
               else f"redsEndpoints.{props['endpoint']}.ssh")
        raise _failed(props, f"cannot log in to {props['ssh_host']}: {err}",
                      f"Fix {key} (or the host's entry in ~/.ssh/config)") from None
    # Any other answer of /health is something answering; the model list says what it serves.
    if health == NOT_READY:
        raise _failed(props, f"the server on {where} answers but is not ready (HTTP 503 on"
                             " /health: still loading its model?)", "Run `pulumi up` again once it is")
    ids = _model_ids(status, body)
    if not ids:
        raise _failed(props, f"the server on {where} answers, but GET /v1/models gives HTTP"
                             f" {status}: {body[:300]!r}",
                      "An OpenAI-compatible server lists the model it serves there")
    expected = props.get("expected_model_id")
    if expected and expected not in ids:
        raise _failed(props, f"the server on {where} advertises {ids}, not {expected!r}",
                      f"Serve that model there (llama-server --alias {expected}), or fix"
                      f" redsEndpoints.{props['endpoint']}.modelId")
    return ids


def _model_ids(status: int, body: bytes) -> list[str] | None:
    """The ids of a /v1/models answer; None when it is not an OpenAI model list."""
    try:
        answer = json.loads(body) if status == 200 else None
    except ValueError:
        return None
    return listed_models(answer) if isinstance(answer, dict) else None


class RedsTunnelCheckProvider(HostProvider):
    """Installs nothing: create and update check, read checks again, delete has nothing to do."""

    update_fields = ("endpoint", "ssh_host", "address", "port", "expected_model_id", "managed_by",
                     "triggers")

    def resource_id(self, props: Mapping[str, Any]) -> str:
        return f"{props['endpoint']}@{props['ssh_host']}:{props['address']}:{int(props['port'])}"

    def stale(self, olds: Mapping[str, Any]) -> bool:
        # Refresh found it silent, or serving another model than the one recorded: check again.
        return not olds.get("answering") or olds.get("model_id") not in (olds.get("model_ids") or [])

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        ids = check(props)
        return {**props, "answering": True, "problem": "", "model_ids": ids,
                "model_id": props.get("expected_model_id") or ids[0], "checked_at": time.time()}

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        try:
            ids, problem = check(props), ""
        except RedsCheckFailed as err:
            ids, problem = [], str(err)
        return ReadResult(id_=id_, outs={**props, "answering": not problem, "problem": problem,
                                         "model_ids": ids})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        return None  # nothing was installed


@dataclass
class RedsTunnelCheckArgs:
    endpoint: str  # the endpoint's name in messages
    connection: pulumi.Input[dict]  # secret; port, user and key may be None: ~/.ssh/config's
    ssh_host: str  # the host as the stack names it (maybe an alias), for people reading diffs
    address: str
    port: int
    expected_model_id: str | None  # None: record the first id /v1/models lists
    managed_by: str | None = None  # the inference host whose server it is, when managed
    # Check again whenever one of these changes (a managed server's start time).
    triggers: dict[str, pulumi.Input[Any]] | None = None


def _check_details(change: Change) -> list[str]:
    lines = changed_lines(change.old, change.new) if change.old and change.new else []
    problem = change.old_outputs.get("problem")
    return [f"refresh found: {problem}", *lines] if problem else lines


KIND = Kind.of(tokens.REDS_TUNNEL_CHECK, "REDS tunnel check", RECHECK, details=_check_details,
               meanings={
    RECHECK: "re-checks the tunnel: nothing is installed on a REDS host",
    CREATE: "opens the tunnel and checks that something answers: nothing is installed on a REDS"
            " host",
    DELETE: "forgotten: nothing was installed on the REDS host, so nothing is removed",
})

class RedsTunnelCheck(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.REDS_TUNNEL_CHECK.name):
    answering: pulumi.Output[bool]
    problem: pulumi.Output[str]
    model_ids: pulumi.Output[list]
    model_id: pulumi.Output[str]
    checked_at: pulumi.Output[float]

    def __init__(self, name: str, args: RedsTunnelCheckArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            RedsTunnelCheckProvider(),
            name,
            {
                "endpoint": args.endpoint,
                "connection": args.connection,
                "ssh_host": args.ssh_host,
                "address": args.address,
                "port": args.port,
                "expected_model_id": args.expected_model_id,
                "managed_by": args.managed_by,
                "triggers": args.triggers or {},
            },
            opts,
            outputs=("answering", "problem", "model_ids", "model_id", "checked_at"),
        )


@dataclass
class RedsEndpointArgs:
    config: EndpointConfig
    private_key: pulumi.Input[str] | None  # secret; None: the IdentityFile of the ssh alias
    inference_host: InferenceHost | None = None  # the managed host it points at, if it does


class RedsEndpoint(pulumi.ComponentResource):
    def __init__(self, name: str, args: RedsEndpointArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        cfg, host = args.config, args.inference_host
        # A managed host's server is checked after that host is up and proven.
        after_host = [host] if host else []
        super().__init__(tokens.REDS_ENDPOINT, name, None,
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                             depends_on=after_host)))
        ssh = cfg.ssh
        self.host_key, connection = pinned_connection(
            name, pulumi.Output.secret(connection_input(ssh.host, ssh.port, ssh.user,
                                                        args.private_key)),
            f"{ssh.user or ''}@{ssh.host}:{ssh.port or ''}", ssh.host_key,
            pulumi.ResourceOptions(parent=self))

        self.check = RedsTunnelCheck(f"{name}-check", RedsTunnelCheckArgs(
            endpoint=name,
            connection=connection,
            ssh_host=ssh.host,
            address=cfg.address,
            port=cfg.port,
            expected_model_id=cfg.model_id,
            managed_by=cfg.inference_host,
            triggers={"started_at": host.unit.started_at} if host else None,
        ), pulumi.ResourceOptions(parent=self, depends_on=after_host))

        # Whenever the check ran again, so do the probes and the smoke test, on the id it recorded.
        rechecked = {"checked_at": self.check.checked_at, "model_id": self.check.model_id}
        after_check = pulumi.ResourceOptions(parent=self, depends_on=[self.check])
        self.proof = prove_endpoint(name, EndpointProofArgs(
            endpoint=name,
            connection=connection,
            port=cfg.port,
            address=cfg.address,
            served_model=self.check.model_id,
            triggers=rechecked,
        ), after_check)

        # Handed to the gateway host, so only a login it can use without this machine's
        # ~/.ssh/config (config/schema/gateway.py refuses an alias-only endpoint as an upstream).
        self.backend = cfg.backend
        self.reach = Reach(endpoint=name, host_key=self.host_key.host_key, ssh_host=ssh.host, ssh_port=ssh.port or 22,
                           ssh_user=ssh.user or "root", private_key=args.private_key,
                           address=cfg.address, port=cfg.port, served_model=self.check.model_id)

        self.outputs: dict[str, Any] = {
            "ssh_host_key": self.host_key.outputs(),
            "ssh_host": ssh.host,
            "remote_port": cfg.port,
            "inference_host": cfg.inference_host,
            "model_id": self.check.model_id,
            "model_ids": self.check.model_ids,
            **self.proof.outputs(cfg.backend),
        }
        self.register_outputs(self.outputs)
