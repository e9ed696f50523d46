"""A canary is promoted to stable only on a passing gate run recorded for exactly that pair,
measured with what it will be served with (seed 001 step 8, "How to maintain it"). The stable
Deployment's own image tag, model and revision are the pair; the fleet's rollout record (a
ConfigMap in its namespace) holds the previous pair, the LiteLLM and harness versions and the
tool registry the stack serves it with, the gate policy, the records as scripts/gate wrote
them, and (binaryData) the task set and each record's evidence. Each record is re-judged from its evidence here with
spear/rollout_gate.py::judge, as the config check before `pulumi up` does: a verdict
written into the ConfigMap is not believed. The evidence's receipts (spear/receipts.py) are the
config check's alone: they verify with a key derived from the gateway's master key, a secret a
policy never sees. The pack sees only the declared `previous` pair; the
comparison with the pairs the last update deployed is the config check's (config/load.py reads
them from the stack's state, which a policy cannot; a ConfigMap carrying them would change on
the update after every change)."""

from __future__ import annotations

import base64
import gzip
import json

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from policies.common import flag_value, image_tag, unknown_is_violation, vllm_containers
from spear import rollout_gate, tokens
from spear.fleet import (GATE_POLICY_JSON, GATE_TASKS_GZ, PART, PREVIOUS_JSON, RECORDS_JSON,
                         ROLLOUT, SERVED_WITH_JSON, STABLE, TRACK, evidence_key)
from spear.vllm import REVISION_FLAG

SEED = "seed 001 step 8 (gate the rollout on the acceptance test)"


def _pair(container, argv) -> rollout_gate.Pair:
    return (image_tag(container) or "", argv[2], flag_value(argv, REVISION_FLAG) or "")


def _unzip(binary, key: str) -> bytes | None:
    return gzip.decompress(base64.b64decode(binary[key])) if key in binary else None


def _records(props) -> tuple[list[rollout_gate.Record], list[rollout_gate.Refused], list[str],
                             rollout_gate.ServedWith | None]:
    """The rollout record's gate records that stand when re-judged, those that do not (each
    blocks only the promotion to its pair), why none could be judged, and what the stable pair
    is served with (which a record must pin)."""
    data, binary = props["data"], props.get("binaryData") or {}
    policy_json = json.loads(data[GATE_POLICY_JSON])
    if policy_json is None:
        return [], [], [], None
    policy = rollout_gate.Policy(**policy_json)
    served = json.loads(data.get(SERVED_WITH_JSON) or "null")
    if served is None:  # no record can be matched to a tuple nobody states
        return [], [], [f"the rollout record does not say what the stable pair is served with"
                        f" ({SERVED_WITH_JSON})"], None
    tasks, problems = rollout_gate.parse_tasks(_unzip(binary, GATE_TASKS_GZ) or b"")
    if problems:
        return [], [], [f"the task set does not parse ({'; '.join(problems)})"], None
    checked, refused = [], []
    for written in json.loads(data[RECORDS_JSON]):
        name = str(written.get("name") if isinstance(written, dict) else None)
        # A policy sees no secret: the config check verified the receipts.
        verdict = rollout_gate.judge(name, written, _unzip(binary, evidence_key(name)), tasks,
                                     policy, None, receipts=False)
        (checked if isinstance(verdict, rollout_gate.Record) else refused).append(verdict)
    return checked, refused, [], rollout_gate.served_with_from_json(served)


def k8s_promotion_gate(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        rollouts = {r.props["metadata"]["namespace"]: r.props for r in args.resources
                    if r.resource_type == tokens.K8S_CONFIG_MAP.type
                    and (r.props["metadata"].get("labels") or {}).get(PART) == ROLLOUT}
        for resource in args.resources:
            if resource.resource_type != tokens.K8S_DEPLOYMENT.type \
                    or (resource.props["metadata"].get("labels") or {}).get(TRACK) != STABLE:
                continue
            namespace = resource.props["metadata"]["namespace"]
            if namespace not in rollouts:
                report(f"{SEED}: {resource.name} serves the stable track in {namespace!r}, which has"
                       " no rollout record. Fix: declare the fleet through vllmFleet, which writes it.",
                       resource.urn)
                continue
            previous = rollout_gate.pair_from_json(json.loads(rollouts[namespace]["data"][PREVIOUS_JSON]))
            records, refused, unjudged, served = _records(rollouts[namespace])
            for container, argv in vllm_containers(resource.props):
                stable = _pair(container, argv)
                reasons = rollout_gate.promotion_refusals(stable, previous, records,
                                                          refused=refused, served=served)
                if reasons:
                    report(f"{SEED}: {resource.name} promotes {rollout_gate.describe(stable)} to"
                           f" stable without a passing gate record: {'; '.join(unjudged + reasons)}."
                           " Fix: run scripts/gate on the candidate and commit the record it"
                           " writes, or roll back to the previous pair.", resource.urn)


POLICY = StackValidationPolicy(
    name="k8s-promotion-gate",
    description="The stable pair is the previous one or has a passing rollout-gate record.",
    validate=k8s_promotion_gate,
    enforcement_level=EnforcementLevel.MANDATORY,
)
