"""Endpoints: what proves an OpenAI-compatible endpoint is fit to depend on, whatever serves it
(an inference host's llama-server, a RunPod pod, a REDS endpoint, a track of the fleet).

The cookbook's three probes and the smoke test's judge are pure (spear/probes.py, spear/smoke.py:
the gateway's pods run them too); verification.py runs the probes as the EndpointVerification
resource, proof.py it and the smoke test for every endpoint family; `Endpoint` is what each
family's component exposes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # names only: each family's module imports this package first
    import pulumi

    from components.endpoints.proof import EndpointProof
    from components.endpoints.reach import Reach
    from config.types import Backend


class Endpoint(Protocol):
    """What every endpoint family's component is to the rest of the stack: how a client reaches
    its server (the gateway's tunnels use it), the backend a client knows it as, its proof, and
    the outputs it exports. The gateway routes `coder` to any of them and waits for the component,
    which waits for its proof."""
    reach: Reach
    backend: Backend
    proof: EndpointProof
    outputs: dict[str, Any]

    def urn(self) -> pulumi.Output[str]: ...
