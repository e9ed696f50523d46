"""The fleet falls back to nothing but the hatch, and only through the hatch hook.

LiteLLM's fallbacks fire on any error, 400, 401, 404 and 422 included (measured). So config.yaml
has none: the hatch hook (spear/rules.py::HATCH_CALLBACK) gives each `coder` request its fallback
to `frontier` itself, lets it reach the frontier only when the fleet answered 429 or 5xx or did
not answer, and holds it against the monthly cap. Any fallback in config.yaml (to any model, a
default, context-window or content-policy one) would escalate client errors past it; without the
hook there is no hatch (and no budget that holds). The gateway config's `hatch` fact (on either
placement: policies/common.py::gateway_config_view) says the route.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationPolicy

from policies.common import GatewayConfigView, for_gateway_config, gateway_config
from spear.rules import CODER_MODEL, FRONTIER_MODEL, HATCH_CALLBACK

SEED = ("seed 001 step 5 (the frontier hatch is for 429 and 5xx only: a client error that"
        " escalated would burn frontier budget on every retry)")
# LiteLLM's fallback settings: each would escalate without the hook's gate.
FALLBACKS = ("fallbacks", "default_fallbacks", "context_window_fallbacks",
             "content_policy_fallbacks")
FIX = (f" Fix: let spear-fleet render config.yaml: no LiteLLM fallbacks, and {HATCH_CALLBACK} in"
       f" litellm_settings.callbacks, which escalates {CODER_MODEL} to {FRONTIER_MODEL}.")


@for_gateway_config
def fallbacks_only_to_hatch(view: GatewayConfigView, report: ReportViolation) -> None:
    config = gateway_config(view.content)
    router, litellm = config.get("router_settings") or {}, config.get("litellm_settings") or {}
    found = [f"{section}.{name}: {settings[name]!r}"
             for section, settings in (("router_settings", router), ("litellm_settings", litellm))
             for name in FALLBACKS if settings.get(name)]
    if found:
        report(f"{SEED}: config.yaml has LiteLLM fallbacks ({'; '.join(found)}); they fire on"
               " 400, 401, 404 and 422 too." + FIX)
    if HATCH_CALLBACK not in (litellm.get("callbacks") or []):
        report(f"{SEED}: config.yaml does not load {HATCH_CALLBACK} (litellm_settings.callbacks),"
               f" so nothing escalates {CODER_MODEL} to {FRONTIER_MODEL} on 429/5xx and no"
               " budget holds." + FIX)
    hatch = view.facts["hatch"]
    if (hatch["from"], hatch["to"]) != (CODER_MODEL, FRONTIER_MODEL):
        report(f"{SEED}: the gateway's hatch goes from {hatch['from']!r} to {hatch['to']!r}, not"
               f" from {CODER_MODEL} to {FRONTIER_MODEL}." + FIX)


POLICY = ResourceValidationPolicy(
    name="fallbacks-only-to-hatch",
    description="No LiteLLM fallbacks: the hatch hook alone escalates coder to frontier.",
    validate=fallbacks_only_to_hatch,
    enforcement_level=EnforcementLevel.MANDATORY,
)
