"""vLLM runs without the flags the cookbook forbids (seed 001 step 3): --reasoning-parser,
--quantization, --enable-prefix-caching and its off switch (each with its reason in
spear/vllm.py)."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationPolicy

from policies.common import VllmCommand, for_vllm_commands
from spear.vllm import FORBIDDEN_FLAGS, forbidden_flags

SEED = "seed 001 step 3 (what must never be added)"


@for_vllm_commands
def vllm_forbidden_flags(command: VllmCommand, report: ReportViolation) -> None:
    for flag in forbidden_flags(command.argv):
        report(f"{SEED}: {command.target} is given {flag}: {FORBIDDEN_FLAGS[flag]}. Fix: remove"
               " it (spear/vllm.py renders the cookbook's flags only).")


POLICY = ResourceValidationPolicy(
    name="vllm-forbidden-flags",
    description="vLLM runs without --reasoning-parser, --quantization, --enable-prefix-caching.",
    validate=vllm_forbidden_flags,
    enforcement_level=EnforcementLevel.MANDATORY,
)
