"""Rules for the vLLM fleet on Kubernetes (seed 001 steps 2-3, 7-8, "How to run it in
production", "How to maintain it"); vLLM's command line: policies/vllm/)."""

from policies.kubernetes import (agent_egress_default_deny, agent_egress_narrow,
                                 agent_seat_sandboxed, api_key_from_secret, gpu_limit_matches_tp,
                                 image_pinned, priority_scheduling, promotion_gate,
                                 vllm_probes)

RULES = (
    image_pinned,
    gpu_limit_matches_tp,
    vllm_probes,
    api_key_from_secret,
    agent_egress_default_deny,
    agent_egress_narrow,
    agent_seat_sandboxed,
    priority_scheduling,
    promotion_gate,
)
