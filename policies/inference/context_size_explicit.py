"""The context size is stated by the deployment and is what llama-server is given.

It is the one value earlier launchers disagreed about, so it has no default anywhere: not in
server.conf, and not llama-server's own fallback to the model's trained length.
"""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import flag_value, for_type, integer
from spear import tokens

SEED = "seed 000 §6.2.3 (context size has no built-in default)"


@for_type(tokens.SERVER_CONF)
def context_size_explicit(args: ResourceValidationArgs, report: ReportViolation) -> None:
    stated = args.props["settings"].get("SPEAR_SERVER_CTX")
    ctx = integer(stated)
    if not ctx:
        report(f"{SEED}: server.conf states no context size (SPEAR_SERVER_CTX is {stated!r})."
               " Fix: set inferenceHosts.<host>.server.ctxSize in the stack.")
        return
    given = flag_value(list(args.props["command_line"]), "--ctx-size", "-c")
    if integer(given) != ctx:
        started = (f"with --ctx-size {given}" if given is not None else
                   "without --ctx-size (so with the model's default)")
        report(f"{SEED}: llama-server is started {started}, but server.conf states {ctx}."
               " Fix: serve.sh must pass --ctx-size from SPEAR_SERVER_CTX.")


POLICY = ResourceValidationPolicy(
    name="context-size-explicit",
    description="The context size is stated in server.conf and passed to llama-server.",
    validate=context_size_explicit,
    enforcement_level=EnforcementLevel.MANDATORY,
)
