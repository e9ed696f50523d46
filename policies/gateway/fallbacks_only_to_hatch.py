"""The fleet falls back to nothing but the hatch, and only with the hatch hook to gate it.

LiteLLM's fallbacks fire on any error, 400, 401, 404 and 422 included (measured). config.yaml
therefore has one fallback, `coder` -> `frontier` (router_settings.fallbacks), and loads the
hatch hook (spear/rules.py::HATCH_CALLBACK), which lets the fallback reach the frontier only when
the fleet answered 429 or 5xx or did not answer, and holds it against the monthly cap. Any other
fallback (to another model, from another model, a default, context-window or content-policy
fallback) would bypass it; the GatewayConfig's `hatch` fact says the same route.
"""

from __future__ import annotations

from pulumi_policy import (EnforcementLevel, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy)

from policies.common import for_type, gateway_config
from spear import tokens
from spear.rules import CODER_MODEL, FRONTIER_MODEL, HATCH_CALLBACK

SEED = ("seed 001 step 5 (the frontier hatch is for 429 and 5xx only: a client error that"
        " escalated would burn frontier budget on every retry)")
HATCH_FALLBACK = {CODER_MODEL: [FRONTIER_MODEL]}
# LiteLLM's other fallback settings: each would escalate without the coder -> frontier gate.
OTHER_FALLBACKS = ("default_fallbacks", "context_window_fallbacks", "content_policy_fallbacks")
FIX = (f" Fix: let spear-fleet render config.yaml: one fallback, {CODER_MODEL} -> {FRONTIER_MODEL},"
       f" gated by {HATCH_CALLBACK}.")


def _fallbacks(settings: dict) -> list:
    value = settings.get("fallbacks") or []
    return value if isinstance(value, list) else [value]


@for_type(tokens.GATEWAY_CONFIG)
def fallbacks_only_to_hatch(args: ResourceValidationArgs, report: ReportViolation) -> None:
    config = gateway_config(args.props["content"])
    router, litellm = config.get("router_settings") or {}, config.get("litellm_settings") or {}
    others = [f"{section}.fallbacks: {entry!r}"
              for section, settings in (("router_settings", router), ("litellm_settings", litellm))
              for entry in _fallbacks(settings) if entry != HATCH_FALLBACK]
    others += [f"{section}.{name}" for section, settings in (("router_settings", router),
                                                             ("litellm_settings", litellm))
               for name in OTHER_FALLBACKS if settings.get(name)]
    if others:
        report(f"{SEED}: config.yaml falls back elsewhere than {CODER_MODEL} -> {FRONTIER_MODEL}"
               f" ({'; '.join(others)}); LiteLLM's fallbacks fire on 400, 401, 404 and 422 too."
               + FIX)
    if HATCH_FALLBACK in _fallbacks(router) and HATCH_CALLBACK not in (litellm.get("callbacks")
                                                                       or []):
        report(f"{SEED}: config.yaml falls back from {CODER_MODEL} to {FRONTIER_MODEL} without"
               f" {HATCH_CALLBACK} in litellm_settings.callbacks, so every client error would"
               " escalate." + FIX)
    hatch = args.props["hatch"]
    if (hatch["from"], hatch["to"]) != (CODER_MODEL, FRONTIER_MODEL):
        report(f"{SEED}: the gateway's hatch goes from {hatch['from']!r} to {hatch['to']!r}, not"
               f" from {CODER_MODEL} to {FRONTIER_MODEL}." + FIX)


POLICY = ResourceValidationPolicy(
    name="fallbacks-only-to-hatch",
    description="The only fallback is coder -> frontier, gated by the hatch hook.",
    validate=fallbacks_only_to_hatch,
    enforcement_level=EnforcementLevel.MANDATORY,
)
