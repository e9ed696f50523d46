"""Every shard of the model manifest has a sha256, so the host verifies what it serves."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type
from spear import tokens
from spear.rules import is_sha256

SEED = "seed 000 §6.2.1 / seed 001 step 2 (the model is a pinned manifest of shards)"


@for_type(tokens.MODEL_FILES)
def model_shards_hashed(args: ResourceValidationArgs, report: ReportViolation) -> None:
    shards = args.props["shards"]
    if not shards:
        report(f"{SEED}: the model manifest lists no shards. Fix: list each GGUF file with its"
               " name, size and sha256 in inferenceHosts.<host>.model.shards.")
    for shard in shards:
        digest = shard.get("sha256")
        if not is_sha256(digest):
            report(f"{SEED}: model shard {shard.get('name')!r} has no sha256 (got {digest!r}), so"
                   " nothing proves the host serves the model that was evaluated. Fix: set its"
                   " sha256 in inferenceHosts.<host>.model.shards from the model's manifest.")


POLICY = ResourceValidationPolicy(
    name="model-shards-hashed",
    description="Every model shard in the manifest has a sha256 the host verifies.",
    validate=model_shards_hashed,
    enforcement_level=EnforcementLevel.MANDATORY,
)
