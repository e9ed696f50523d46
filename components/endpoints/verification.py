"""EndpointVerification: the cookbook's three probes (spear/probes.py) as a deploy check.

An endpoint serves an OpenAI-compatible API on a port of a host's loopback; the probes reach it
through an SSH channel to that host, as the smoke test does, so no port is opened on the network.
They run in order on create and whenever an input changes (the triggers say what serves the
endpoint, e.g. its unit's start time); the first failure fails the `up`, naming the endpoint, the
probe and the reason. The outputs record what passed and which models the endpoint listed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pulumi

from spear.probes import MODEL_LIST, ProbeResult, failure, listed_models, probes
from components.hostops.host_resource import CheckProvider, HostResource
from components.hostops.ssh import RemoteError, Session, bearer_headers
from components.hostops.waiting import wait_until
from review.kinds import IN_PLACE, Kind
from spear import tokens

UNREACHABLE = "unreachable"
# A large model's first completion may load or warm caches; the model list answers at once.
COMPLETION_TIMEOUT = 300.0
LIST_TIMEOUT = 30.0
# Right after a rollout a Service's address may refuse or drop connections for a while, until
# kube-proxy has the new pods' endpoints (seen here: up to a minute on a busy machine): behind a
# Service (settle_seconds > 0) only nothing answering for this long fails, each try short so a
# dropped one does not use it up.
REACH_SECONDS = 180.0
REACH_TRY_SECONDS = 5.0


class VerificationFailed(RemoteError):
    """A probe failed; the message names the endpoint, the probe, the reason and what was seen."""

    def __init__(self, endpoint: str, result: ProbeResult) -> None:
        super().__init__(failure(endpoint, result))
        self.result = result


@dataclass
class EndpointVerificationArgs:
    endpoint: str  # the endpoint's name in messages, e.g. the backend name
    connection: pulumi.Input[dict]
    port: pulumi.Input[int]
    served_model: pulumi.Input[str]  # the name /v1/models must list and the requests use
    address: pulumi.Input[str] = "127.0.0.1"
    api_key: pulumi.Input[str] | None = None  # a secret; sent as `Authorization: Bearer ...`
    # Re-run whenever one of these changes (what serves the endpoint: a unit's start time, say).
    triggers: dict[str, pulumi.Input[Any]] | None = None
    # Behind a Service, the pods a rollout replaced keep answering while they drain: a re-run
    # waits this long first, so what it proves is the new pods (0: nothing to wait for).
    settle_seconds: float = 0.0


class EndpointVerificationProvider(CheckProvider):
    update_fields = ("triggers", "endpoint", "address", "port", "served_model", "api_key",
                     "settle_seconds")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['endpoint']}@{props['connection']['host']}:{props['address']}:{props['port']}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        endpoint = props["endpoint"]
        headers = bearer_headers(props.get("api_key"))
        passed: list[str] = []
        served_ids: list[str] = []
        behind_service = float(props.get("settle_seconds") or 0) > 0
        if olds is not None and behind_service:
            time.sleep(float(props["settle_seconds"]))
        with Session(props["connection"]) as host:
            port, address = int(props["port"]), props["address"]
            if behind_service:
                wait_until(lambda: _answers(host, port, address), REACH_SECONDS)
            for probe in probes(props["served_model"]):
                timeout = LIST_TIMEOUT if probe.name == MODEL_LIST else COMPLETION_TIMEOUT
                try:
                    status, body = host.http(port, probe.method, probe.path, probe.encoded_body(),
                                             address=address, timeout=timeout, headers=headers)
                except ConnectionError as err:
                    raise VerificationFailed(endpoint, ProbeResult(probe.name, False, UNREACHABLE,
                                                                   str(err))) from err
                result = probe.judge(status, body)
                if not result.passed:
                    raise VerificationFailed(endpoint, result)
                if probe.name == MODEL_LIST:
                    served_ids = listed_models(json.loads(body)) or []
                passed.append(result.name)
        return {**props, "passed": passed, "served_model_ids": served_ids}


def _answers(host: Session, port: int, address: str) -> bool:
    try:
        host.http(port, "GET", "/health", address=address, timeout=REACH_TRY_SECONDS)
        return True
    except ConnectionError:
        return False


KIND = Kind.of(tokens.ENDPOINT_VERIFICATION, "endpoint verification", IN_PLACE,
               meanings={IN_PLACE: "re-verifies the endpoint: model list, completion, tool call"})

class EndpointVerification(HostResource, module=tokens.DYNAMIC_MODULE,
                           name=tokens.ENDPOINT_VERIFICATION.name):
    passed: pulumi.Output[list]
    served_model_ids: pulumi.Output[list]

    def __init__(self, name: str, args: EndpointVerificationArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            EndpointVerificationProvider(),
            name,
            {
                "endpoint": args.endpoint,
                "connection": args.connection,
                "address": args.address,
                "port": args.port,
                "served_model": args.served_model,
                "api_key": args.api_key,
                "triggers": args.triggers or {},
                **({"settle_seconds": args.settle_seconds} if args.settle_seconds else {}),
            },
            opts,
            outputs=("passed", "served_model_ids"),
            secret_inputs=("api_key",),
        )
