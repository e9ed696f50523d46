"""The fleet falls back to nothing but the hatch, and only through the hatch hook.

LiteLLM's own fallbacks (router_settings or litellm_settings: `fallbacks`, `default_fallbacks`,
`context_window_fallbacks`, `content_policy_fallbacks`) also fire on 400, 401, 404 and 422
(measured), so even a fallback to `frontier` there would escalate a malformed request and burn
the hatch's budget on every retry. The one way to `frontier` is the hatch hook
(spear/rules.py::HATCH_CALLBACK), configured by config.yaml's `spear_hatch` from `coder` to
`frontier` on 429, 5xx and timeouts only.
"""

from __future__ import annotations

from pulumi_policy import (EnforcementLevel, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy)

from policies.common import for_type, gateway_config
from spear import tokens
from spear.rules import CODER_MODEL, FRONTIER_MODEL, HATCH_CALLBACK, HATCH_STATUSES

SEED = ("seed 001 step 5 (the frontier hatch is for 429 and 5xx only: a client error that"
        " escalated would burn frontier budget on every retry)")
FALLBACK_SETTINGS = ("fallbacks", "default_fallbacks", "context_window_fallbacks",
                     "content_policy_fallbacks")
FIX = (" Fix: remove LiteLLM fallbacks from config.yaml and let spear-fleet render it: the hatch"
       f" hook escalates {CODER_MODEL} to {FRONTIER_MODEL} on {', '.join(HATCH_STATUSES)} only.")


@for_type(tokens.GATEWAY_CONFIG)
def fallbacks_only_to_hatch(args: ResourceValidationArgs, report: ReportViolation) -> None:
    config = gateway_config(args.props["content"])
    for section in ("router_settings", "litellm_settings"):
        settings = config.get(section) or {}
        for name in FALLBACK_SETTINGS:
            if settings.get(name):
                report(f"{SEED}: config.yaml sets {section}.{name} ({settings[name]!r}); LiteLLM's"
                       " fallbacks fire on 400, 401, 404 and 422 too, whatever they go to." + FIX)
    hatch = config.get("spear_hatch") or {}
    route = (hatch.get("from"), hatch.get("to"))
    if route != (CODER_MODEL, FRONTIER_MODEL):
        report(f"{SEED}: config.yaml's spear_hatch goes from {route[0]!r} to {route[1]!r}, not"
               f" from {CODER_MODEL} to {FRONTIER_MODEL}." + FIX)
    if sorted(map(str, hatch.get("statuses") or [])) != sorted(HATCH_STATUSES):
        report(f"{SEED}: config.yaml's spear_hatch escalates on {hatch.get('statuses')!r}, not on"
               f" {', '.join(HATCH_STATUSES)} only." + FIX)
    callbacks = (config.get("litellm_settings") or {}).get("callbacks") or []
    if HATCH_CALLBACK not in callbacks:
        report(f"{SEED}: config.yaml's litellm_settings.callbacks lack {HATCH_CALLBACK}, so nothing"
               " classifies the fleet's failures." + FIX)


POLICY = ResourceValidationPolicy(
    name="fallbacks-only-to-hatch",
    description="No LiteLLM fallbacks; the hatch hook alone escalates coder to frontier.",
    validate=fallbacks_only_to_hatch,
    enforcement_level=EnforcementLevel.MANDATORY,
)
