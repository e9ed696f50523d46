"""Endpoints: what proves an OpenAI-compatible endpoint is fit to depend on, whatever serves it
(an inference host's llama-server now; a vLLM pod or another host later).

probes.py holds the cookbook's three probes (pure); verification.py runs them as the
EndpointVerification resource.
"""
