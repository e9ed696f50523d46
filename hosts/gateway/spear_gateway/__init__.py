"""spear-fleet's code inside the gateway (LiteLLM proxy callbacks); see litellm_hooks.py."""
