"""Rules for vLLM's command line wherever it runs: a RunPod pod or the fleet's Deployments (seed
001 steps 2-3). Each reads the command lines through `policies.common.vllm_commands`, so a
target added there is checked by every rule at once."""

from policies.vllm import forbidden_flags, revision_pinned, tool_parser

RULES = (
    revision_pinned,
    tool_parser,
    forbidden_flags,
)
