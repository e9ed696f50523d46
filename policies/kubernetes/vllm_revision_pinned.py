"""vLLM in a Deployment serves the model at a revision pinned by its full 40-hex commit id
(seed 001 step 2: a model card is a mutable branch)."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import flag_value, for_type, vllm_containers
from spear import tokens
from spear.rules import is_commit
from spear.vllm import REVISION_FLAG

SEED = "seed 001 step 2 (pin the model)"


@for_type(tokens.K8S_DEPLOYMENT)
def k8s_vllm_revision_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for container, argv in vllm_containers(args.props):
        revision = flag_value(argv, REVISION_FLAG)
        if not is_commit(revision):
            report(f"{SEED}: container {container['name']} serves the model at revision"
                   f" {revision!r}, not a full 40-hex commit id. Fix: set"
                   " vllmFleet.stable.revision (or canary.revision) to the commit the gate validated.")


POLICY = ResourceValidationPolicy(
    name="k8s-vllm-revision-pinned",
    description="vLLM Deployments serve a model revision pinned by its commit id.",
    validate=k8s_vllm_revision_pinned,
    enforcement_level=EnforcementLevel.MANDATORY,
)
