"""The spear-fleet policy pack: one rule per module, each named after its rule."""

from pulumi_policy import EnforcementLevel, PolicyPack

import context_size_explicit
import inference_system_unit
import jinja_enabled
import kv_cache_and_slots
import llama_source_pinned
import model_shards_hashed
import ports_distinct
import server_loopback_only
import yarn_matches_context

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

PolicyPack(
    name="spear-fleet",
    # Each rule states its own level; a rule that forgot would block rather than only advise.
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[rule.POLICY for rule in RULES],
)
