"""vLLM in a Deployment runs without the flags the cookbook forbids: --reasoning-parser,
--quantization, --enable-prefix-caching (each with its reason in spear/vllm.py)."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type, vllm_containers
from spear import tokens
from spear.vllm import FORBIDDEN_FLAGS, forbidden_flags

SEED = "seed 001 step 3 (what must never be added)"


@for_type(tokens.K8S_DEPLOYMENT)
def k8s_vllm_forbidden_flags(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for container, argv in vllm_containers(args.props):
        for flag in forbidden_flags(argv):
            report(f"{SEED}: container {container['name']} is given {flag}: {FORBIDDEN_FLAGS[flag]}."
                   " Fix: remove it (spear/vllm.py renders the cookbook's flags only).")


POLICY = ResourceValidationPolicy(
    name="k8s-vllm-forbidden-flags",
    description="vLLM Deployments run without --reasoning-parser, --quantization, --enable-prefix-caching.",
    validate=k8s_vllm_forbidden_flags,
    enforcement_level=EnforcementLevel.MANDATORY,
)
