"""Endpoints: what proves an OpenAI-compatible endpoint is fit to depend on, whatever serves it
(an inference host's llama-server, a RunPod pod, a REDS endpoint, a track of the fleet).

The cookbook's three probes and the smoke test's judge are pure (spear/probes.py, spear/smoke.py:
the gateway's pods run them too); verification.py runs the probes as the EndpointVerification
resource, proof.py it and the smoke test for every endpoint family.
"""
