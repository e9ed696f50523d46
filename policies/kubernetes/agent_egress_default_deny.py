"""The agent sandbox's namespace denies all egress by default (seed 001 step 7): a NetworkPolicy
there selects every pod, has Egress among its policy types and no egress rule, so only what
another policy allows (the gateway, the package mirrors, DNS) leaves. A coding agent with open
egress plus a hostile string in a README is an exfiltration primitive."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from policies.common import unknown_is_violation
from spear import tokens
from spear.fleet import AGENT_SANDBOX, ROLE

SEED = "seed 001 step 7 (sandbox what the agent executes: default-deny egress)"


def _denies_all_egress(props) -> bool:
    spec = props["spec"]
    selector = spec.get("podSelector") or {}
    return (not selector.get("matchLabels") and not selector.get("matchExpressions")
            and "Egress" in list(spec.get("policyTypes") or ())
            and not list(spec.get("egress") or ()))


def agent_egress_default_deny(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        sandboxes = [(r.props["metadata"]["name"], r.urn) for r in args.resources
                     if r.resource_type == tokens.K8S_NAMESPACE.type
                     and ((r.props["metadata"].get("labels") or {}).get(ROLE) == AGENT_SANDBOX)]
        denied = {r.props["metadata"]["namespace"] for r in args.resources
                  if r.resource_type == tokens.K8S_NETWORK_POLICY.type and _denies_all_egress(r.props)}
        for namespace, urn in sandboxes:
            if namespace not in denied:
                report(f"{SEED}: the agent namespace {namespace!r} has no NetworkPolicy that selects"
                       " every pod and denies all egress. Fix: keep the fleet's"
                       " default-deny-egress policy (vllmFleet.agentSandbox); allow only the"
                       " gateway and the mirrors beside it.", urn)


POLICY = StackValidationPolicy(
    name="k8s-agent-egress-default-deny",
    description="The agent sandbox namespace has a default-deny egress NetworkPolicy.",
    validate=agent_egress_default_deny,
    enforcement_level=EnforcementLevel.MANDATORY,
)
