"""spear-inference.service is a system unit placed in system.slice.

Sandboxed tool commands run in scopes under user.slice; the two trees are disjoint, so no limit,
OOM kill or task-limit hit in a tool call can reach the model server.
"""

import posixpath

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type
from spear import tokens
from spear.rules import INFERENCE_UNIT as UNIT
from spear.rules import SYSTEM_SLICE as SLICE
from spear.rules import SYSTEM_UNIT_DIR

SEED = "seed 000 §6.2.6 (service placement)"


@for_type(tokens.SYSTEMD_UNIT)
def inference_system_unit(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    if props["unit"] != UNIT:
        return
    problems = []
    if props["scope"] != "system":
        problems.append(f"it is a {props['scope']} unit, not a system unit")
    if posixpath.dirname(props["unit_path"]) != SYSTEM_UNIT_DIR:
        problems.append(f"it is installed as {props['unit_path']}, not under {SYSTEM_UNIT_DIR}")
    if props["slice"] != SLICE:
        problems.append(f"it is declared for {props['slice']}")
    slices = [line.strip()[len("Slice="):] for line in props["content"].splitlines()
              if line.strip().startswith("Slice=")]
    if slices != [SLICE]:
        problems.append("its unit file has " + (", ".join(f"Slice={s}" for s in slices)
                                                or "no Slice= line"))
    if problems:
        report(f"{SEED}: {UNIT} must be a system unit in {SLICE}, but " + "; ".join(problems)
               + f". Fix: install it under {SYSTEM_UNIT_DIR} with Slice={SLICE}"
               " (hosts/inference/spear-inference.service).")


POLICY = ResourceValidationPolicy(
    name="inference-system-unit",
    description="spear-inference.service is a system unit in system.slice.",
    validate=inference_system_unit,
    enforcement_level=EnforcementLevel.MANDATORY,
)
