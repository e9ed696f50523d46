"""Rules for the endpoints: vLLM on a RunPod pod (seed 000 §6.2.7; its command line's rules
are policies/vllm/'s)."""

from policies.endpoints import api_key_not_in_plain_text

RULES = (
    api_key_not_in_plain_text,
)
