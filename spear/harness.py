"""Harness wiring (seed 001 step 6): what each coding harness needs to reach the gateway with a
developer's virtual key, every one asking for `coder` in its own dialect on the one port.

Pure: the gateway URL, the key and the model in; per harness the environment and, for Codex,
the config file. The stack exports it per developer as a secret; `scripts/harness-env`
(gate/harness_env.py) prints one (`eval "$(scripts/harness-env ana qwen-code)"`).
"""

from __future__ import annotations

import shlex
from typing import Any

QWEN_CODE = "qwen-code"
OPENHANDS = "openhands"
CLAUDE_CODE = "claude-code"
CODEX = "codex"
HARNESSES = (QWEN_CODE, OPENHANDS, CLAUDE_CODE, CODEX)

CODEX_CONFIG = "~/.codex/config.toml"
CODEX_KEY_ENV = "OWNED_API_KEY"


def wiring(gateway_url: str, key: str, model: str) -> dict[str, dict[str, Any]]:
    """harness -> {"env": {...}, "run": how to start it, "file": {path, content} or absent}."""
    v1 = f"{gateway_url}/v1"
    codex_toml = (f'model = "{model}"\nmodel_provider = "owned"\n\n'
                  '[model_providers.owned]\nname = "spear-fleet gateway"\n'
                  f'base_url = "{v1}"\nenv_key = "{CODEX_KEY_ENV}"\n'
                  # Codex speaks only Responses; the gateway bridges it onto chat completions.
                  'wire_api = "responses"\n')
    return {
        QWEN_CODE: {"env": {"OPENAI_BASE_URL": v1, "OPENAI_API_KEY": key, "OPENAI_MODEL": model},
                    "run": "qwen"},
        # OpenHands ignores these unless told to prefer them over its saved settings.
        OPENHANDS: {"env": {"LLM_MODEL": f"openai/{model}", "LLM_BASE_URL": v1,
                            "LLM_API_KEY": key},
                    "run": "openhands --override-with-envs"},
        # ANTHROPIC_AUTH_TOKEN is sent as a bearer token, which the gateway's keys are.
        CLAUDE_CODE: {"env": {"ANTHROPIC_BASE_URL": gateway_url, "ANTHROPIC_AUTH_TOKEN": key,
                              "ANTHROPIC_MODEL": model},
                      "run": "claude"},
        CODEX: {"env": {CODEX_KEY_ENV: key}, "run": "codex",
                "file": {"path": CODEX_CONFIG, "content": codex_toml}},
    }


def shell_exports(entry: dict[str, Any]) -> str:
    """`export NAME=value` lines for eval, quoted for the shell."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in entry["env"].items())
