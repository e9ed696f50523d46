"""A canary is promoted to stable only on a passing gate result recorded for exactly that pair
(seed 001 step 8, "How to maintain it"). The stable Deployment's own image tag, model and
revision are the pair; the fleet's rollout record (a ConfigMap in its namespace) holds the
previous pair and the gate records, judged by spear/rollout_gate.py, as the config check before
`pulumi up` judges them."""

from __future__ import annotations

import json

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from policies.common import flag_value, unknown_is_violation, vllm_containers
from spear import rollout_gate, tokens
from spear.fleet import PART, PREVIOUS_JSON, RECORDS_JSON, ROLLOUT, STABLE, TRACK
from spear.rules import IMAGE
from spear.vllm import REVISION_FLAG

SEED = "seed 001 step 8 (gate the rollout on the acceptance test)"


def _pair(container, argv) -> rollout_gate.Pair:
    match = IMAGE.fullmatch(container["image"])
    return ((match["tag"] or "") if match else "", argv[2], flag_value(argv, REVISION_FLAG) or "")


def k8s_promotion_gate(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        records = {r.props["metadata"]["namespace"]: r.props["data"] for r in args.resources
                   if r.resource_type == tokens.K8S_CONFIG_MAP.type
                   and (r.props["metadata"].get("labels") or {}).get(PART) == ROLLOUT}
        for resource in args.resources:
            if resource.resource_type != tokens.K8S_DEPLOYMENT.type \
                    or (resource.props["metadata"].get("labels") or {}).get(TRACK) != STABLE:
                continue
            namespace = resource.props["metadata"]["namespace"]
            if namespace not in records:
                report(f"{SEED}: {resource.name} serves the stable track in {namespace!r}, which has"
                       " no rollout record. Fix: declare the fleet through vllmFleet, which writes it.",
                       resource.urn)
                continue
            data = records[namespace]
            previous = json.loads(data[PREVIOUS_JSON])
            gate = [rollout_gate.from_json(r) for r in json.loads(data[RECORDS_JSON])]
            for container, argv in vllm_containers(resource.props):
                stable = _pair(container, argv)
                reasons = rollout_gate.promotion_refusals(
                    stable, None if previous is None else
                    (previous["tag"], previous["model"], previous["revision"]), gate)
                if reasons:
                    report(f"{SEED}: {resource.name} promotes {rollout_gate.describe(stable)} to"
                           f" stable without a passing gate record: {'; '.join(reasons)}. Fix:"
                           " record the gate's result for exactly this pair in"
                           " vllmFleet.rolloutGate, or roll back to the previous pair.", resource.urn)


POLICY = StackValidationPolicy(
    name="k8s-promotion-gate",
    description="The stable pair is the previous one or has a passing rollout-gate record.",
    validate=k8s_promotion_gate,
    enforcement_level=EnforcementLevel.MANDATORY,
)
