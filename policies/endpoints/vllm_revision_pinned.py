"""vLLM serves the model at a pinned revision: `--revision` and a full 40-hex commit id.

A model card is a mutable branch: an upstream edit of the chat template changes the tool-call
markup and breaks every agent overnight, and the eval is evidence about one revision only.
"""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import flag_value, for_type
from spear import tokens
from spear.rules import is_commit
from spear.vllm import REVISION_FLAG

SEED = "seed 001 step 2 (pin the model)"


@for_type(tokens.POD_VLLM)
def vllm_revision_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    revision = flag_value(list(args.props["command_line"]), REVISION_FLAG)
    if not is_commit(revision):
        report(f"{SEED}: vLLM serves the model at revision {revision!r}, not a full 40-hex commit"
               " id; a branch or no revision follows the card's edits. Fix: set"
               " runpod.pods.<name>.vllm.revision to the commit validated by the eval.")


POLICY = ResourceValidationPolicy(
    name="vllm-revision-pinned",
    description="vLLM serves the model at a revision pinned by its commit id.",
    validate=vllm_revision_pinned,
    enforcement_level=EnforcementLevel.MANDATORY,
)
