"""Harness wiring (spear/harness.py, seed 001 step 6): each harness gets exactly the seed's
variables in its own dialect, all asking for `coder` with the developer's key."""

from __future__ import annotations

import tomllib

from spear import harness

URL = "http://127.0.0.1:4000"
KEY = "sk-ana-virtual-key"
WIRING = harness.wiring(URL, KEY, "coder")


def test_qwen_code_gets_the_openai_variables():
    assert WIRING[harness.QWEN_CODE]["env"] == {
        "OPENAI_BASE_URL": f"{URL}/v1", "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "coder"}


def test_openhands_gets_the_litellm_prefixed_model_and_runs_with_override_with_envs():
    entry = WIRING[harness.OPENHANDS]
    assert entry["env"] == {"LLM_MODEL": "openai/coder", "LLM_BASE_URL": f"{URL}/v1",
                            "LLM_API_KEY": KEY}
    assert entry["run"] == "openhands --override-with-envs"


def test_claude_code_gets_the_bearer_token_and_the_base_url_without_v1():
    assert WIRING[harness.CLAUDE_CODE]["env"] == {
        "ANTHROPIC_BASE_URL": URL, "ANTHROPIC_AUTH_TOKEN": KEY, "ANTHROPIC_MODEL": "coder"}


def test_codex_gets_a_config_toml_on_responses_with_its_key_from_the_environment():
    entry = WIRING[harness.CODEX]
    assert entry["env"] == {"OWNED_API_KEY": KEY}
    assert entry["file"]["path"] == "~/.codex/config.toml"
    config = tomllib.loads(entry["file"]["content"])
    assert (config["model"], config["model_provider"]) == ("coder", "owned")
    provider = config["model_providers"]["owned"]
    assert provider["wire_api"] == "responses"
    assert provider["env_key"] == "OWNED_API_KEY"
    assert provider["base_url"] == f"{URL}/v1" and provider["base_url"].endswith("/v1")
    assert KEY not in entry["file"]["content"]  # the key stays in the environment


def test_every_harness_is_wired():
    assert set(WIRING) == set(harness.HARNESSES)
