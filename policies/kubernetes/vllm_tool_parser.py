"""vLLM in a Deployment runs with `--enable-auto-tool-choice --tool-call-parser qwen3_coder`
(seed 001 step 3), or another name its engine gives that parser (spear/vllm.py's table, by the
image's tag): without them tool calls come back as text in `content`."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type, image_tag, vllm_containers
from spear import tokens
from spear.vllm import AUTO_TOOL_CHOICE, TOOL_CALL_PARSER, TOOL_CALL_PARSER_FLAG, flags, tool_parser_problem

SEED = "seed 001 step 3 (serve it: the parser flags this model needs)"


@for_type(tokens.K8S_DEPLOYMENT)
def k8s_vllm_tool_parser(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for container, argv in vllm_containers(args.props):
        given = flags(argv)
        missing = [] if AUTO_TOOL_CHOICE in given else [AUTO_TOOL_CHOICE]
        parser = given.get(TOOL_CALL_PARSER_FLAG)
        if tool_parser_problem(parser, image_tag(container)) is not None:
            missing.append(f"{TOOL_CALL_PARSER_FLAG} {TOOL_CALL_PARSER} (or a name of its parser"
                           f" on this engine; {parser!r} is not)" if parser else
                           f"{TOOL_CALL_PARSER_FLAG} {TOOL_CALL_PARSER}")
        if missing:
            report(f"{SEED}: container {container['name']} lacks {' and '.join(missing)}; tool"
                   " calls would come back as text. Fix: render the command with spear/vllm.py.")


POLICY = ResourceValidationPolicy(
    name="k8s-vllm-tool-parser",
    description="vLLM Deployments run with --enable-auto-tool-choice --tool-call-parser qwen3_coder.",
    validate=k8s_vllm_tool_parser,
    enforcement_level=EnforcementLevel.MANDATORY,
)
