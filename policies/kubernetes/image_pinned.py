"""Every container image of a Deployment is pinned: a version tag (never `latest`, never no tag)
or an @sha256 digest. The engine version is part of the pin that the gate's evidence is about."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import containers, for_type
from spear import tokens
from spear.rules import image_pin_problem

SEED = "seed 001 'How to maintain it' (the engine version is part of the pin)"


@for_type(tokens.K8S_DEPLOYMENT)
def k8s_image_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for container in containers(args.props):
        problem = image_pin_problem(container["image"])
        if problem:
            report(f"{SEED}: container {container['name']}: {problem}. Fix: set"
                   " vllmFleet.stable.tag (and canary.tag) to a version tag, e.g. v0.24.0,"
                   " optionally with its digest.")


POLICY = ResourceValidationPolicy(
    name="k8s-image-pinned",
    description="Deployment images carry a version tag (not latest) or a digest.",
    validate=k8s_image_pinned,
    enforcement_level=EnforcementLevel.MANDATORY,
)
