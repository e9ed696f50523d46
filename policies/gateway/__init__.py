"""Rules for the gateway (seed 001 steps 5-6, "Budget hygiene"): its credentials, its routes, its
hatch and every developer's key."""

from policies.gateway import (coder_routes_declared_endpoints, developer_key_budget,
                              fallbacks_only_to_hatch, gateway_secrets_only_as_secrets,
                              hatch_alert_below_cap)

RULES = (
    gateway_secrets_only_as_secrets,
    coder_routes_declared_endpoints,
    fallbacks_only_to_hatch,
    developer_key_budget,
    hatch_alert_below_cap,
)
