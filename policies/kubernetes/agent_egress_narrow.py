"""What the agent sandbox may reach is narrow (seed 001 step 7): every egress rule of a
NetworkPolicy in an agent namespace names its destinations, and each is one host or one subnet
(`spear/rules.py::egress_network_problem`), or the stack's in-cluster gateway's pods
(`spear/rules.py::pods_peer` of a gateway Deployment's selector in its namespace). A rule without
destinations, an `ipBlock` of 0.0.0.0/0, a selector of every namespace or the cluster's DNS opens
the default-deny (NetworkPolicies add up: one wide rule undoes the deny)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from policies.common import unknown_is_violation
from spear import tokens
from spear.fleet import AGENT_SANDBOX, ROLE
from spear.rules import (EGRESS_NETWORK_TEXT, GATEWAY_APP, GATEWAY_POD_LABELS, egress_network_problem,
                         pods_peer)

SEED = "seed 001 step 7 (sandbox what the agent executes: egress only to the gateway and the mirrors)"


def _gateway_peers(args: StackValidationArgs) -> list[dict[str, Any]]:
    """The pods of each of the stack's in-cluster gateways, as the sandbox may name them."""
    return [pods_peer(r.props["metadata"]["namespace"], r.props["spec"]["selector"]["matchLabels"])
            for r in args.resources
            if r.resource_type == tokens.K8S_DEPLOYMENT.type
            and r.props["metadata"]["name"] == GATEWAY_APP
            and r.props["spec"]["selector"]["matchLabels"] == GATEWAY_POD_LABELS]


def _peer_problem(peer: Any, gateways: list[dict[str, Any]]) -> str | None:
    if peer in gateways:
        return None
    block = peer.get("ipBlock") if isinstance(peer, Mapping) else None
    if not isinstance(block, Mapping) or set(peer) != {"ipBlock"}:
        shown = dict(peer) if isinstance(peer, Mapping) else peer
        return f"a destination {shown!r} that is neither an ipBlock nor the gateway's pods"
    return egress_network_problem(block.get("cidr"))


def agent_egress_narrow(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        sandboxes = {r.props["metadata"]["name"] for r in args.resources
                     if r.resource_type == tokens.K8S_NAMESPACE.type
                     and (r.props["metadata"].get("labels") or {}).get(ROLE) == AGENT_SANDBOX}
        gateways = _gateway_peers(args)
        for r in args.resources:
            if r.resource_type != tokens.K8S_NETWORK_POLICY.type \
                    or r.props["metadata"]["namespace"] not in sandboxes:
                continue
            name = r.props["metadata"]["name"]
            for i, rule in enumerate(r.props["spec"].get("egress") or ()):
                peers = list(rule.get("to") or ())
                problems = ([_peer_problem(peer, gateways) for peer in peers] if peers else
                            ["no destinations, which allows every one"])
                for problem in filter(None, problems):
                    report(f"{SEED}: NetworkPolicy {name!r} egress[{i}]: {problem}. Fix: allow"
                           f" {EGRESS_NETWORK_TEXT} (vllmFleet.agentSandbox.mirrors), or the"
                           " gateway's pods (taken from `gateway`).", r.urn)


POLICY = StackValidationPolicy(
    name="k8s-agent-egress-narrow",
    description="The agent sandbox's egress goes only to a host or subnet each, or the gateway's pods.",
    validate=agent_egress_narrow,
    enforcement_level=EnforcementLevel.MANDATORY,
)
