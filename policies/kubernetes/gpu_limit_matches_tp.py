"""A vLLM container's `nvidia.com/gpu` limit equals its `--tensor-parallel-size`: fewer GPUs and
vLLM cannot start its workers, more and the extra GPUs sit idle (seed 001 step 3)."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import flag_value, for_type, vllm_containers
from spear import tokens

SEED = "seed 001 step 3 (--tensor-parallel-size splits the model over the replica's GPUs)"
GPU = "nvidia.com/gpu"


def _count(value) -> int | None:
    text = str(value)
    if text.endswith(".0"):  # the engine's JSON numbers are floats
        text = text[:-2]
    return int(text) if text.isdigit() else None


@for_type(tokens.K8S_DEPLOYMENT)
def k8s_gpu_limit_matches_tp(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for container, argv in vllm_containers(args.props):
        tp = _count(flag_value(argv, "--tensor-parallel-size") or "1")
        limits = (container.get("resources") or {}).get("limits") or {}
        gpus = _count(limits[GPU]) if GPU in limits else None
        if gpus != tp:
            report(f"{SEED}: container {container['name']} has {GPU} limit"
                   f" {gpus if gpus is not None else 'unset'} but --tensor-parallel-size {tp}."
                   " Fix: let the fleet render both from vllmFleet.tensorParallelSize.")


POLICY = ResourceValidationPolicy(
    name="k8s-gpu-limit-matches-tp",
    description="A vLLM container's nvidia.com/gpu limit equals its tensor-parallel size.",
    validate=k8s_gpu_limit_matches_tp,
    enforcement_level=EnforcementLevel.MANDATORY,
)
