"""llama-server runs with --jinja: the model's chat template, and with it native tool calling."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type, switch_on
from spear import tokens

SEED = "seed 000 §6.2.2"


@for_type(tokens.SERVER_CONF)
def jinja_enabled(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not switch_on(list(args.props["command_line"]), "--jinja", "--no-jinja"):
        report(f"{SEED}: --jinja is required: without the chat template the assistant loses"
               " structured tool calls entirely. Fix: serve.sh must pass --jinja (and nothing"
               " after it may pass --no-jinja).")


POLICY = ResourceValidationPolicy(
    name="jinja-enabled",
    description="llama-server runs with --jinja (chat template, tool calling).",
    validate=jinja_enabled,
    enforcement_level=EnforcementLevel.MANDATORY,
)
