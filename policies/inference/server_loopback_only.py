"""The inference server listens on loopback only; clients come through an SSH tunnel."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import flag_value, for_type
from spear import tokens
from spear.rules import is_loopback

SEED = "seed 000 §6.2 (llama-server listens on 127.0.0.1 only; clients use an SSH tunnel)"


@for_type(tokens.SERVER_CONF)
def server_loopback_only(args: ResourceValidationArgs, report: ReportViolation) -> None:
    host = flag_value(list(args.props["command_line"]), "--host")
    if not is_loopback(host):
        report(f"{SEED}: llama-server listens on {host or 'its default address'}, not on a"
               " loopback address (127.0.0.1, ::1, localhost), and its API has no authentication"
               " of its own. Fix: set inferenceHosts.<host>.server.host to 127.0.0.1.")


POLICY = ResourceValidationPolicy(
    name="server-loopback-only",
    description="The inference server listens on a loopback address only.",
    validate=server_loopback_only,
    enforcement_level=EnforcementLevel.MANDATORY,
)
