"""vLLM runs without the flags the cookbook forbids: --reasoning-parser, --quantization,
--enable-prefix-caching (each with its reason in spear/vllm.py)."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type
from spear import tokens
from spear.vllm import FORBIDDEN_FLAGS, forbidden_flags

SEED = "seed 001 step 3 (what must never be added)"


@for_type(tokens.POD_VLLM)
def vllm_forbidden_flags(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for flag in forbidden_flags(list(args.props["command_line"])):
        report(f"{SEED}: vLLM is given {flag}: {FORBIDDEN_FLAGS[flag]}. Fix: remove it from the"
               " command line (spear/vllm.py renders the cookbook's flags only).")


POLICY = ResourceValidationPolicy(
    name="vllm-forbidden-flags",
    description="vLLM runs without --reasoning-parser, --quantization, --enable-prefix-caching.",
    validate=vllm_forbidden_flags,
    enforcement_level=EnforcementLevel.MANDATORY,
)
