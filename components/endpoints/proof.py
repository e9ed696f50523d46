"""What proves an endpoint, whatever serves it: the cookbook's verification (model list,
completion, tool call) and the seed's smoke test, run together through one SSH login after
every start of the server. Each endpoint family (inference host, pod, REDS) calls this once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.endpoints.verification import EndpointVerification, EndpointVerificationArgs
from components.hostops.smoke_test import SmokeTest, SmokeTestArgs
from config.types import Backend


@dataclass
class EndpointProofArgs:
    endpoint: str  # the endpoint's name in messages
    connection: pulumi.Input[dict]
    port: pulumi.Input[int]
    served_model: pulumi.Input[str]  # what /v1/models must list and the requests ask for
    address: pulumi.Input[str] = "127.0.0.1"
    api_key: pulumi.Input[str] | None = None  # a secret, for a server that demands one
    # What serves the endpoint (a start time, a check): both run again when it changes.
    triggers: dict[str, pulumi.Input[Any]] | None = None
    settle_seconds: float = 0.0  # EndpointVerificationArgs.settle_seconds


@dataclass(frozen=True)
class EndpointProof:
    verification: EndpointVerification
    smoke_test: SmokeTest

    def outputs(self, backend: Backend) -> dict[str, Any]:
        """What every endpoint exports about its proof and the client backend that reaches it."""
        return {
            "verified": self.verification.passed,
            "smoke_test": self.smoke_test.summary,
            "backend": {"name": backend.name, "client_port": backend.port},
        }


def prove_endpoint(name: str, args: EndpointProofArgs,
                   opts: pulumi.ResourceOptions) -> EndpointProof:
    """`<name>-verification` and then `<name>-smoke-test`, both with `opts` (parent, depends_on):
    the verification waits for the endpoint to answer at all, the smoke test asks after it."""
    verification = EndpointVerification(f"{name}-verification", EndpointVerificationArgs(
        endpoint=args.endpoint,
        connection=args.connection,
        port=args.port,
        address=args.address,
        served_model=args.served_model,
        api_key=args.api_key,
        triggers=args.triggers,
        settle_seconds=args.settle_seconds,
    ), opts)
    return EndpointProof(
        verification=verification,
        smoke_test=SmokeTest(f"{name}-smoke-test", SmokeTestArgs(
            connection=args.connection,
            port=args.port,
            address=args.address,
            model=args.served_model,
            api_key=args.api_key,
            triggers=args.triggers,
        ), pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[verification]))),
    )
