"""Whatever runs in the agent sandbox's namespace runs sandboxed (seed 001 step 7, "Sandbox what
the agent executes"): every workload there (Deployment, Pod, StatefulSet, DaemonSet, ReplicaSet,
Job, CronJob) has the seat's minimum, `spear/seats.py::seat_problems`: user 1000 and never root,
no privilege escalation, every capability dropped, a read-only root, no service account token,
no host namespace, the workspace the only writable mount and nothing of the host mounted, every
image pinned by digest, no credential as a literal environment value (the key only from a
Secret), and the namespace's sandbox runtime where it names one (its `spear-fleet/runtime-class`
label, from agentSandbox.runtimeClass). The model writes code and the harness runs it: from the seat on, the endpoint is an
execution path into whatever the harness can touch.

The agent namespaces are the stack's Namespaces labelled as one (as the egress rules find them);
a workload whose namespace or pod spec preview cannot know fails, as every rule of the pack."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from policies.common import unknown_is_violation
from spear import tokens
from spear.fleet import AGENT_SANDBOX, ROLE
from spear.seats import RUNTIME_CLASS, pod_spec, seat_problems

SEED = "seed 001 step 7 (sandbox what the agent executes: the minimum for one seat)"
_WORKLOADS = {kind.type: kind.type.rsplit(":", 1)[-1] for kind in tokens.K8S_WORKLOADS}


def agent_seat_sandboxed(args: StackValidationArgs, report: ReportViolation) -> None:
    # agent namespace -> the RuntimeClass its label requires (None: the node's default)
    sandboxes: dict[str, str | None] = {}
    with unknown_is_violation(report):
        sandboxes = {r.props["metadata"]["name"]: r.props["metadata"]["labels"].get(RUNTIME_CLASS)
                     for r in args.resources
                     if r.resource_type == tokens.K8S_NAMESPACE.type
                     and (r.props["metadata"].get("labels") or {}).get(ROLE) == AGENT_SANDBOX}
    for r in args.resources:
        kind = _WORKLOADS.get(r.resource_type)
        if kind is None:
            continue
        # One workload's unknown value fails that workload, and the others are still judged.
        with unknown_is_violation(lambda message, urn=r.urn: report(message, urn)):
            namespace = (r.props.get("metadata") or {}).get("namespace")
            if namespace not in sandboxes:
                continue
            name = r.props["metadata"].get("name") or r.name
            for problem in seat_problems(pod_spec(kind, r.props), sandboxes[namespace]):
                report(f"{SEED}: {kind} {name!r} in the agent namespace: {problem}. Fix: run"
                       " harnesses as the stack's seats (vllmFleet.agentSandbox.seats), which"
                       " render the minimum (components/agent_seats/manifests.py).", r.urn)


POLICY = StackValidationPolicy(
    name="k8s-agent-seat-sandboxed",
    description="Every workload in the agent namespace has the seat's minimum sandbox.",
    validate=agent_seat_sandboxed,
    enforcement_level=EnforcementLevel.MANDATORY,
)
