"""(Advisory) the KV cache is quantised and the server has the slots the deployment expects.

The single-user profile wants a q8_0 KV cache (context length at a small quality cost) and one
slot (more would only fragment the KV cache). A team deployment may want otherwise: the values
are this rule's config (`--policy-pack-config`), so it advises rather than blocks.
"""

from pulumi_policy import (EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy)

from policies.common import flag_value, for_type, integer
from spear import tokens

SEED = "seed 000 §6.2.2 (--cache-type-k/-v q8_0, --parallel 1)"


@for_type(tokens.SERVER_CONF)
def kv_cache_and_slots(args: ResourceValidationArgs, report: ReportViolation) -> None:
    config = args.get_config()
    cache_type, slots = config["cacheType"], int(config["slots"])
    argv = list(args.props["command_line"])
    for names in (("--cache-type-k", "-ctk"), ("--cache-type-v", "-ctv")):
        given = flag_value(argv, *names)
        if given != cache_type:
            report(f"{SEED}: llama-server runs with {names[0]} {given or '(its default, f16)'},"
                   f" not {cache_type}. Fix: serve.sh passes {names[0]} {cache_type}; or set this"
                   " rule's cacheType for this deployment.")
    parallel = flag_value(argv, "--parallel", "-np")
    if integer(parallel) != slots:
        report(f"{SEED}: llama-server runs with --parallel {parallel or '(its default)'}, not"
               f" {slots} slot(s); each slot gets a share of the KV cache. Fix: set"
               f" inferenceHosts.<host>.server.parallel to {slots}; or set this rule's slots for"
               " this deployment.")


POLICY = ResourceValidationPolicy(
    name="kv-cache-and-slots",
    description="The KV cache type and slot count are those of the deployment's profile.",
    validate=kv_cache_and_slots,
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=PolicyConfigSchema(properties={
        "cacheType": {"type": "string", "default": "q8_0"},
        "slots": {"type": "integer", "minimum": 1, "default": 1},
    }),
)
