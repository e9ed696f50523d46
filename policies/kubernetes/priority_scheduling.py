"""Priorities and priority scheduling deploy together ("How to run it in production"): the
gateway stamps priorities on requests to a fleet (its tenancy record) only when the fleet's vLLM
runs with `--scheduling-policy priority`, and vLLM runs with it only when priorities are stamped.
vLLM refuses a non-zero priority without priority scheduling; priority scheduling without
priorities leaves interactive requests queued behind background loops."""

from __future__ import annotations

import json

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from policies.common import unknown_is_violation, vllm_containers
from spear import tokens
from spear.fleet import PART, PRIORITIES, TENANCY
from spear.vllm import PRIORITY_SCHEDULING, SCHEDULING_POLICY_FLAG, priority_scheduling

SEED = "seed 001 'How to run it in production' (the flag and the field deploy together)"


def k8s_priority_scheduling(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        stamped = {r.props["metadata"]["namespace"]: bool(json.loads(r.props["data"][PRIORITIES]))
                   for r in args.resources
                   if r.resource_type == tokens.K8S_CONFIG_MAP.type
                   and (r.props["metadata"].get("labels") or {}).get(PART) == TENANCY}
        for resource in args.resources:
            if resource.resource_type != tokens.K8S_DEPLOYMENT.type:
                continue
            namespace = resource.props["metadata"]["namespace"]
            for container, argv in vllm_containers(resource.props):
                scheduled = priority_scheduling(argv)
                priorities = stamped.get(namespace, False)
                if scheduled != priorities:
                    report(f"{SEED}: {resource.name} container {container['name']} runs"
                           f" {'with' if scheduled else 'without'} {SCHEDULING_POLICY_FLAG}"
                           f" {PRIORITY_SCHEDULING} while the gateway"
                           f" {'stamps' if priorities else 'stamps no'} priorities on its requests."
                           " Fix: set vllmFleet.schedulingPriority, which renders both.", resource.urn)


POLICY = StackValidationPolicy(
    name="k8s-priority-scheduling",
    description="Gateway priorities only with --scheduling-policy priority, and the reverse.",
    validate=k8s_priority_scheduling,
    enforcement_level=EnforcementLevel.MANDATORY,
)
