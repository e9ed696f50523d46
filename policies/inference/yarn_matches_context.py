"""YaRN is on exactly when the context exceeds the model's trained length, and then matches it.

YaRN is static: it rescales every prompt, so it must not be on for a window the model was
trained for. Past that length the scale must be their ratio, the original context the trained
length, and the GGUF's context_length raised, or llama-server caps each slot at it.
"""

import math

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import flag_value, flag_values, for_type, integer
from spear import tokens

SEED = "seed 000 §6.2.2 (--ctx-size and the YaRN flags)"
FIX = ("Fix: serve.sh derives these flags from SPEAR_SERVER_CTX, SPEAR_SERVER_NATIVE_CTX and"
       " SPEAR_SERVER_ARCH; check those settings (inferenceHosts.<host>.server.ctxSize, .model.nativeCtx,"
       " .model.arch) and serve.sh.")
# serve.sh writes a ratio that is not a whole number rounded to 6 decimal places.
_SCALE_TOLERANCE = 1e-6


def _context_overrides(argv: list[str]) -> list[str]:
    """The --override-kv entries that set a context_length (one flag may hold several, comma-separated)."""
    entries = [e for value in flag_values(argv, "--override-kv") for e in value.split(",")]
    return [e for e in entries if e.split("=", 1)[0].endswith(".context_length")]


@for_type(tokens.SERVER_CONF)
def yarn_matches_context(args: ResourceValidationArgs, report: ReportViolation) -> None:
    settings = args.props["settings"]
    ctx = integer(settings.get("SPEAR_SERVER_CTX"))
    native = integer(settings.get("SPEAR_SERVER_NATIVE_CTX"))
    if not ctx or not native:
        report(f"{SEED}: whether YaRN is needed cannot be decided without SPEAR_SERVER_CTX and"
               f" SPEAR_SERVER_NATIVE_CTX (got {ctx}, {native}). Fix: set"
               " inferenceHosts.<host>.server.ctxSize and inferenceHosts.<host>.model.nativeCtx in"
               " the stack.")
        return
    argv = list(args.props["command_line"])
    given = {
        "--rope-scaling": flag_value(argv, "--rope-scaling"),
        "--rope-scale": flag_value(argv, "--rope-scale"),
        "--yarn-orig-ctx": flag_value(argv, "--yarn-orig-ctx"),
    }
    overrides = _context_overrides(argv)
    if ctx <= native:
        present = [flag for flag, value in given.items() if value is not None] + overrides
        if present:
            report(f"{SEED}: the context {ctx} fits the trained length {native}, so no YaRN and"
                   f" no context_length override, but llama-server gets {', '.join(present)}"
                   f" (YaRN would rescale every prompt). {FIX}")
        return
    wanted = f"{settings.get('SPEAR_SERVER_ARCH')}.context_length=int:{ctx}"
    problems = []
    if given["--rope-scaling"] != "yarn":
        problems.append(f"--rope-scaling is {given['--rope-scaling']}, not yarn")
    try:
        scale_ok = math.isclose(float(given["--rope-scale"]), ctx / native, rel_tol=0,
                                abs_tol=_SCALE_TOLERANCE)
    except (TypeError, ValueError):
        scale_ok = False
    if not scale_ok:
        problems.append(f"--rope-scale is {given['--rope-scale']}, not {ctx / native:g}")
    if integer(given["--yarn-orig-ctx"]) != native:
        problems.append(f"--yarn-orig-ctx is {given['--yarn-orig-ctx']}, not {native}")
    if overrides != [wanted]:
        problems.append(f"the context_length override is {overrides or 'missing'}, not {wanted}")
    if problems:
        report(f"{SEED}: the context {ctx} exceeds the trained length {native}, but "
               + "; ".join(problems) + f". {FIX}")


POLICY = ResourceValidationPolicy(
    name="yarn-matches-context",
    description="YaRN flags are present exactly when the context exceeds the trained length, and match it.",
    validate=yarn_matches_context,
    enforcement_level=EnforcementLevel.MANDATORY,
)
