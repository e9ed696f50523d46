"""Rules for the inference hosts (seed 000 §6.2, seed 001 pin/serve)."""

from policies.inference import (context_size_explicit, inference_system_unit, jinja_enabled,
                                kv_cache_and_slots, llama_source_pinned, model_shards_hashed,
                                ports_distinct, server_loopback_only, yarn_matches_context)

RULES = (
    llama_source_pinned,
    model_shards_hashed,
    context_size_explicit,
    yarn_matches_context,
    jinja_enabled,
    server_loopback_only,
    inference_system_unit,
    ports_distinct,
    kv_cache_and_slots,
)
