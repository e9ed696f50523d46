"""vLLM runs with `--enable-auto-tool-choice --tool-call-parser qwen3_coder` (seed 001 step 3), or
another name its engine gives that parser (spear/vllm.py's table, by the image's tag): without
them the engine never extracts the calls, which come back as text in `content` and look like a
working endpoint until an agent needs a tool."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationPolicy

from policies.common import VllmCommand, for_vllm_commands
from spear.vllm import AUTO_TOOL_CHOICE, TOOL_CALL_PARSER, TOOL_CALL_PARSER_FLAG, flags, tool_parser_problem

SEED = "seed 001 step 3 (serve it: the parser flags this model needs)"


@for_vllm_commands
def vllm_tool_parser(command: VllmCommand, report: ReportViolation) -> None:
    given = flags(command.argv)
    missing = [] if AUTO_TOOL_CHOICE in given else [AUTO_TOOL_CHOICE]
    parser = given.get(TOOL_CALL_PARSER_FLAG)
    # An image without a tag (a digest) gives no engine version: only the parser's first name.
    if tool_parser_problem(parser, command.engine_tag) is not None:
        missing.append(f"{TOOL_CALL_PARSER_FLAG} {TOOL_CALL_PARSER} (or a name of its parser"
                       f" on this engine; {parser!r} is not)" if parser else
                       f"{TOOL_CALL_PARSER_FLAG} {TOOL_CALL_PARSER}")
    if missing:
        report(f"{SEED}: {command.target} lacks {' and '.join(missing)}; tool calls would come"
               " back as text. Fix: render the command line with spear/vllm.py.")


POLICY = ResourceValidationPolicy(
    name="vllm-tool-parser",
    description="vLLM runs with --enable-auto-tool-choice --tool-call-parser qwen3_coder.",
    validate=vllm_tool_parser,
    enforcement_level=EnforcementLevel.MANDATORY,
)
