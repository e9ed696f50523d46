"""The hatch's spend alert fires before its cap shuts it: the gateway config's `hatch` fact (what
config.yaml's hatch hook is given, on a host or in the cluster) has 0 < alert_usd <
monthly_cap_usd."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationPolicy

from policies.common import GatewayConfigView, for_gateway_config
from spear.rules import alert_below_cap

SEED = ('seed 001 step 5 and "Budget hygiene" (the hatch has a hard monthly cap, and someone'
        " hears of it before it is reached)")


@for_gateway_config
def hatch_alert_below_cap(view: GatewayConfigView, report: ReportViolation) -> None:
    hatch = view.facts["hatch"]
    if not alert_below_cap(hatch["alert_usd"], hatch["monthly_cap_usd"]):
        report(f"{SEED}: the gateway's hatch has alert_usd {hatch['alert_usd']!r} and"
               f" monthly_cap_usd {hatch['monthly_cap_usd']!r}; the alert must be above 0 and"
               " below the cap. Fix: set gateway.hatch.alertUsd below gateway.hatch.monthlyCapUsd.")


POLICY = ResourceValidationPolicy(
    name="hatch-alert-below-cap",
    description="The hatch's spend alert is below its monthly cap.",
    validate=hatch_alert_below_cap,
    enforcement_level=EnforcementLevel.MANDATORY,
)
