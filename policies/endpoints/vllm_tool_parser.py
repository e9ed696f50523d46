"""vLLM runs with the model's tool-call parser: `--enable-auto-tool-choice` and
`--tool-call-parser qwen3_coder`.

Without them the engine never extracts the calls: they come back as text in `content`, which
looks like a working endpoint until an agent needs a tool.
"""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import flag_value, for_type
from spear import tokens
from spear.vllm import AUTO_TOOL_CHOICE, TOOL_CALL_PARSER, TOOL_CALL_PARSER_FLAG, tool_parser_problem

SEED = "seed 001 step 3 (serve it: the parser flags this model needs)"


@for_type(tokens.POD_VLLM)
def vllm_tool_parser(args: ResourceValidationArgs, report: ReportViolation) -> None:
    argv = list(args.props["command_line"])
    if AUTO_TOOL_CHOICE not in argv:
        report(f"{SEED}: {AUTO_TOOL_CHOICE} is missing; it is mandatory beside the tool-call"
               " parser. Fix: render the command line with spear/vllm.py, which adds it.")
    parser = flag_value(argv, TOOL_CALL_PARSER_FLAG)
    # A pod's engine version is not known (no image tag to read), so only the parser's first name.
    if tool_parser_problem(parser, None) is not None:
        report(f"{SEED}: {TOOL_CALL_PARSER_FLAG} is {parser!r}, not {TOOL_CALL_PARSER!r} (the"
               " model card's parser); tool calls would come back as text. Fix: render the"
               " command line with spear/vllm.py, which passes it.")


POLICY = ResourceValidationPolicy(
    name="vllm-tool-parser",
    description="vLLM runs with --enable-auto-tool-choice and --tool-call-parser qwen3_coder.",
    validate=vllm_tool_parser,
    enforcement_level=EnforcementLevel.MANDATORY,
)
