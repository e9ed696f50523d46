"""Harness wiring (spear/harness.py, seed 001 step 6): each harness gets exactly the seed's
variables in its own dialect, all asking for `coder` with the developer's key, the window the
gateway serves, and the install command of the stack's version."""

from __future__ import annotations

import json
import tomllib

from localhosts.images.harness_install import lock_files
from spear import harness

URL = "http://127.0.0.1:4000"
KEY = "sk-ana-virtual-key"
VERSIONS = {harness.QWEN_CODE: "0.24.5", harness.OPENHANDS: "1.16.1",
            harness.CLAUDE_CODE: "2.1.329", harness.CODEX: "0.170.0"}
WINDOW = harness.Window(context=32768, max_output=4096)
WIRING = harness.wiring(URL, KEY, "coder", VERSIONS, WINDOW)
BARE = harness.wiring(URL, KEY, "coder", VERSIONS, None)


def test_qwen_code_gets_the_openai_variables():
    assert WIRING[harness.QWEN_CODE]["env"] == {
        "OPENAI_BASE_URL": f"{URL}/v1", "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "coder"}


def test_qwen_code_is_told_the_served_window_and_output_limit_in_its_settings_file():
    file = WIRING[harness.QWEN_CODE]["file"]
    assert file["path"] == "~/.qwen/settings.json"
    assert json.loads(file["content"]) == {
        "privacy": {"usageStatisticsEnabled": False},
        "model": {"generationConfig": {"contextWindowSize": 32768,
                                       "samplingParams": {"max_tokens": 4096}}}}
    assert KEY not in file["content"]


def test_openhands_gets_the_litellm_prefixed_model_its_own_price_list_and_runs_with_override_with_envs():
    entry = WIRING[harness.OPENHANDS]
    assert entry["env"] == {"LLM_MODEL": "openai/coder", "LLM_BASE_URL": f"{URL}/v1",
                            "LLM_API_KEY": KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    assert entry["run"] == "openhands --override-with-envs"


def test_claude_code_gets_the_bearer_token_the_base_url_without_v1_and_the_window():
    assert WIRING[harness.CLAUDE_CODE]["env"] == {
        "ANTHROPIC_BASE_URL": URL, "ANTHROPIC_AUTH_TOKEN": KEY, "ANTHROPIC_MODEL": "coder",
        "CLAUDE_CODE_DISABLE_THINKING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_CONTEXT_TOKENS": "32768",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "4096", **CLAUDE_CODE_METRICS}


CLAUDE_CODE_METRICS = {
    "CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "otlp",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{URL}/spear/harness-telemetry",
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta",
    "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer {KEY}"}


def test_claude_code_sends_its_metrics_to_the_gateway_alone_with_the_developers_key():
    env = WIRING[harness.CLAUDE_CODE]["env"]
    assert {k: env[k] for k in CLAUDE_CODE_METRICS} == CLAUDE_CODE_METRICS
    # No event or log exporter: prompts and tool inputs never leave the developer's machine.
    assert not any(name.startswith("OTEL_LOGS") or name == "OTEL_EXPORTER_OTLP_ENDPOINT"
                   for name in env)


def test_codex_gets_a_config_toml_on_responses_with_its_key_from_the_environment():
    entry = WIRING[harness.CODEX]
    assert entry["env"] == {"OWNED_API_KEY": KEY}
    assert entry["file"]["path"] == "~/.codex/config.toml"
    config = tomllib.loads(entry["file"]["content"])
    assert (config["model"], config["model_provider"]) == ("coder", "owned")
    assert config["model_context_window"] == 32768
    provider = config["model_providers"]["owned"]
    assert provider["wire_api"] == "responses"
    assert provider["env_key"] == "OWNED_API_KEY"
    assert provider["base_url"] == f"{URL}/v1" and provider["base_url"].endswith("/v1")
    assert KEY not in entry["file"]["content"]  # the key stays in the environment


def test_every_harness_is_wired():
    assert set(WIRING) == set(harness.HARNESSES)


def test_the_developers_key_is_read_back_from_the_wiring_it_was_written_into():
    assert harness.developer_key(WIRING) == KEY
    other = harness.wiring(URL, "sk-bob-virtual-key", "coder", VERSIONS, WINDOW)
    assert harness.developer_key(other) == "sk-bob-virtual-key"

def test_each_harness_carries_the_stacks_version_and_the_command_that_installs_it():
    assert {h: e["version"] for h, e in WIRING.items()} == VERSIONS
    assert {h: e["install"] for h, e in WIRING.items()} == {
        harness.QWEN_CODE: "npm install -g @qwen-code/qwen-code@0.24.5",
        harness.CLAUDE_CODE: "npm install -g @anthropic-ai/claude-code@2.1.329",
        harness.CODEX: "npm install -g @openai/codex@0.170.0",
        harness.OPENHANDS: "uv tool install --python 3.12 openhands==1.16.1"}


def test_without_a_known_window_no_harness_is_told_one():
    assert json.loads(BARE[harness.QWEN_CODE]["file"]["content"]) == {
        "privacy": {"usageStatisticsEnabled": False}}  # its own statistics stay off regardless
    assert "model_context_window" not in tomllib.loads(BARE[harness.CODEX]["file"]["content"])
    told = {"CLAUDE_CODE_MAX_CONTEXT_TOKENS", "CLAUDE_CODE_MAX_OUTPUT_TOKENS"}
    assert not told & {name for entry in BARE.values() for name in entry["env"]}


def test_the_default_versions_are_exact_versions_of_every_harness():
    assert set(harness.DEFAULT_VERSIONS) == set(harness.HARNESSES)
    assert all(harness.EXACT_VERSION.fullmatch(v) for v in harness.DEFAULT_VERSIONS.values())


# Lockfiles (spear/harness.py::lock_problem): what the seats install from.

def test_every_default_version_has_a_committed_lock_of_exactly_that_version():
    for name, version in harness.DEFAULT_VERSIONS.items():
        assert harness.lock_problem(name, version, lock_files(name, version)) is None, name


def test_a_missing_lock_file_is_named():
    files = {**lock_files(harness.CODEX, "0.169.0"), "package-lock.json": None}
    assert harness.lock_problem(harness.CODEX, "0.169.0", files) == "package-lock.json missing"


def test_an_npm_lock_of_another_version_is_refused_though_its_manifest_asks_for_the_pin():
    files = lock_files(harness.CODEX, "0.170.0")
    files["package.json"] = lock_files(harness.CODEX, "0.169.0")["package.json"]
    assert harness.lock_problem(harness.CODEX, "0.169.0", files) == \
        "its lock holds @openai/codex 0.170.0, not 0.169.0"


def test_a_manifest_asking_for_more_than_the_harness_is_refused():
    files = lock_files(harness.CODEX, "0.169.0")
    manifest = json.loads(files["package.json"])
    manifest["dependencies"]["left-pad"] = "1.3.0"
    files["package.json"] = json.dumps(manifest).encode()
    assert harness.lock_problem(harness.CODEX, "0.169.0", files).startswith(
        'its manifest asks for {"@openai/codex": "0.169.0", "left-pad": "1.3.0"}')


def test_a_uv_lock_of_another_openhands_is_refused():
    files = lock_files(harness.OPENHANDS, "1.16.0")
    files["uv.lock"] = files["uv.lock"].replace(b'name = "openhands"\nversion = "1.16.0"',
                                                b'name = "openhands"\nversion = "1.17.0"')
    assert harness.lock_problem(harness.OPENHANDS, "1.16.0", files) == \
        "its lock holds openhands 1.17.0, not 1.16.0"


def test_what_is_no_lock_at_all_is_refused_saying_so():
    files = {"package.json": b"{}", "package-lock.json": b"not json"}
    assert harness.lock_problem(harness.CODEX, "0.169.0", files).startswith("not a lock of @openai/codex")
