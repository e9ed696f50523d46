"""Rules for the endpoints: vLLM on a RunPod pod (seed 001 steps 2-3, seed 000 §6.2.7)."""

from policies.endpoints import (api_key_not_in_plain_text, vllm_forbidden_flags,
                                vllm_revision_pinned, vllm_tool_parser)

RULES = (
    vllm_revision_pinned,
    vllm_tool_parser,
    vllm_forbidden_flags,
    api_key_not_in_plain_text,
)
