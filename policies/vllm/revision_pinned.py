"""vLLM serves the model at a revision pinned by its full 40-hex commit id (seed 001 step 2): a
model card is a mutable branch, and an upstream edit of its chat template changes the tool-call
markup overnight; the eval is evidence about one revision only."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationPolicy

from policies.common import VllmCommand, flag_value, for_vllm_commands
from spear.rules import is_commit
from spear.vllm import REVISION_FLAG

SEED = "seed 001 step 2 (pin the model)"


@for_vllm_commands
def vllm_revision_pinned(command: VllmCommand, report: ReportViolation) -> None:
    revision = flag_value(command.argv, REVISION_FLAG)
    if not is_commit(revision):
        report(f"{SEED}: {command.target} serves the model at revision {revision!r}, not a full"
               " 40-hex commit id; a branch or no revision follows the card's edits. Fix: set"
               " the revision (runpod.pods.<name>.vllm.revision, vllmFleet.stable.revision or"
               " canary.revision) to the commit the eval validated.")


POLICY = ResourceValidationPolicy(
    name="vllm-revision-pinned",
    description="vLLM serves a model revision pinned by its commit id, on a pod or in the fleet.",
    validate=vllm_revision_pinned,
    enforcement_level=EnforcementLevel.MANDATORY,
)
