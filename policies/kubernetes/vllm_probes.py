"""A vLLM container has readiness and liveness probes: without readiness a rollout sends
requests to a replica still loading weights; without liveness a wedged engine keeps its share of
the traffic (seed 001 "How to run it in production": the deployment recipe owns probes)."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type, vllm_containers
from spear import tokens

SEED = "seed 001 'How to run it in production' (probes, rollout)"


@for_type(tokens.K8S_DEPLOYMENT)
def k8s_vllm_probes(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for container, _ in vllm_containers(args.props):
        missing = [p for p in ("readinessProbe", "livenessProbe") if not container.get(p)]
        if missing:
            report(f"{SEED}: container {container['name']} has no {' and no '.join(missing)}."
                   " Fix: probe vLLM's /health (components/vllm_fleet/manifests.py does).")


POLICY = ResourceValidationPolicy(
    name="k8s-vllm-probes",
    description="vLLM containers have readiness and liveness probes.",
    validate=k8s_vllm_probes,
    enforcement_level=EnforcementLevel.MANDATORY,
)
