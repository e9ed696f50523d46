"""What the agent sandbox may reach is narrow (seed 001 step 7): every egress rule of a
NetworkPolicy in an agent namespace names its destinations, and each is one host or one subnet
(`spear/rules.py::egress_network_problem`), or the cluster's DNS. A rule without destinations, an
`ipBlock` of 0.0.0.0/0, or a selector of every namespace opens the default-deny to everything
(NetworkPolicies add up: one wide rule undoes the deny)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from policies.common import unknown_is_violation
from spear import tokens
from spear.fleet import AGENT_SANDBOX, ROLE
from spear.rules import EGRESS_NETWORK_TEXT, egress_network_problem

SEED = "seed 001 step 7 (sandbox what the agent executes: egress only to the gateway and the mirrors)"
# The one peer that is no address: the cluster's DNS (components/vllm_fleet/manifests.py).
DNS_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}


def _peer_problem(peer: Any) -> str | None:
    if peer == DNS_PEER:
        return None
    block = peer.get("ipBlock") if isinstance(peer, Mapping) else None
    if not isinstance(block, Mapping) or set(peer) != {"ipBlock"}:
        shown = dict(peer) if isinstance(peer, Mapping) else peer
        return f"a destination {shown!r} that is neither an ipBlock nor the cluster's DNS"
    return egress_network_problem(block.get("cidr"))


def agent_egress_narrow(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        sandboxes = {r.props["metadata"]["name"] for r in args.resources
                     if r.resource_type == tokens.K8S_NAMESPACE.type
                     and (r.props["metadata"].get("labels") or {}).get(ROLE) == AGENT_SANDBOX}
        for r in args.resources:
            if r.resource_type != tokens.K8S_NETWORK_POLICY.type \
                    or r.props["metadata"]["namespace"] not in sandboxes:
                continue
            name = r.props["metadata"]["name"]
            for i, rule in enumerate(r.props["spec"].get("egress") or ()):
                peers = list(rule.get("to") or ())
                problems = ([_peer_problem(peer) for peer in peers] if peers else
                            ["no destinations, which allows every one"])
                for problem in filter(None, problems):
                    report(f"{SEED}: NetworkPolicy {name!r} egress[{i}]: {problem}. Fix: allow"
                           f" {EGRESS_NETWORK_TEXT} (vllmFleet.agentSandbox.gateway and"
                           " .mirrors).", r.urn)


POLICY = StackValidationPolicy(
    name="k8s-agent-egress-narrow",
    description="The agent sandbox's egress goes only to a host or subnet each, or the cluster DNS.",
    validate=agent_egress_narrow,
    enforcement_level=EnforcementLevel.MANDATORY,
)
