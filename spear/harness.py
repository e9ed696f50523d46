"""Harness wiring (seed 001 step 6): what each coding harness needs to reach the gateway with a
developer's virtual key, every one asking for `coder` in its own dialect on the one port.

Pure: the gateway URL, the key, the model, the stack's harness versions and the window the
gateway serves in; per harness the environment, the install command of its pinned version and,
for Codex and Qwen-Code, the config file. The stack exports it per developer as a secret;
`scripts/harness-env` (gate/harness_env.py) prints one (`eval "$(scripts/harness-env ana
qwen-code)"`).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spear.rules import HARNESS_METRICS_PATH, IMAGE

QWEN_CODE = "qwen-code"
OPENHANDS = "openhands"
CLAUDE_CODE = "claude-code"
CODEX = "codex"
HARNESSES = (QWEN_CODE, OPENHANDS, CLAUDE_CODE, CODEX)

# The versions this wiring was run against (issue 20): the default of `harnesses.<harness>`.
DEFAULT_VERSIONS = {QWEN_CODE: "0.24.4", OPENHANDS: "1.16.0", CLAUDE_CODE: "2.1.328",
                    CODEX: "0.169.0"}
# An exact release (npm's and PyPI's alike), never a range or a tag: the stack pins what runs.
EXACT_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z]+(\.[0-9A-Za-z]+)*)?")
EXACT_VERSION_TEXT = ("an exact version such as 1.2.3 or 1.2.3-beta.1 (no range, tag or"
                      " 'latest': the stack pins what developers run)")
# harness -> (registry, package): npm for the three Node harnesses, PyPI for OpenHands.
PACKAGES = {QWEN_CODE: ("npm", "@qwen-code/qwen-code"), CLAUDE_CODE: ("npm", "@anthropic-ai/claude-code"),
            CODEX: ("npm", "@openai/codex"), OPENHANDS: ("pypi", "openhands")}

# Each pinned version's lockfile, committed in the project (LOCKS/<harness>/<version>/): npm's
# manifest and package-lock, or a uv project and its uv.lock. The seats' harnesses are installed
# from it (localhosts/images/harness_install.py), so a pin pins every dependency, not the
# harness's own package alone: `scripts/harness-lock <harness> <version>` writes one.
LOCKS = "hosts/seat/harnesses"
LOCK_FILES = {"npm": ("package.json", "package-lock.json"), "pypi": ("pyproject.toml", "uv.lock")}

# The seat image's recipe (localhosts/images/seat_image.py) tags an image with the versions it
# holds, so a reference names them: a stack whose `harnesses` moved past its image's is refused
# at preview, not at the `up`'s dialect check (components/agent_seats) a minute in.
SEAT_IMAGE_TAG = re.compile(r"h-[0-9a-f]{12}")


def seat_image_tag(versions: Mapping[str, str]) -> str:
    """The tag of the seat image that holds exactly these versions (every harness's)."""
    text = json.dumps({h: versions[h] for h in HARNESSES}, sort_keys=True)
    return "h-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def seat_image_problem(reference: str, versions: Mapping[str, str]) -> str | None:
    """Why the seat image `reference` does not hold `versions`, as far as its tag says; None when
    it holds them or its tag is not the recipe's (an image built otherwise: the dialect check at
    `up`, which asks each harness its version, is what checks it). The config check and the
    tests call it."""
    match = IMAGE.fullmatch(reference)
    tag = match["tag"] if match else None
    if tag is None or not SEAT_IMAGE_TAG.fullmatch(tag) or tag == seat_image_tag(versions):
        return None
    return (f"its tag {tag} names other harness versions than these, whose image is tagged"
            f" {seat_image_tag(versions)}")


CODEX_CONFIG = "~/.codex/config.toml"
CODEX_KEY_ENV = "OWNED_API_KEY"
QWEN_SETTINGS = "~/.qwen/settings.json"


@dataclass(frozen=True)
class Window:
    """What the gateway's `coder` serves a request: its context window (the smallest among its
    upstreams) and the output limit the harness should ask for within it."""
    context: int
    max_output: int


def install_command(harness: str, version: str) -> str:
    registry, package = PACKAGES[harness]
    if registry == "npm":
        return f"npm install -g {package}@{version}"
    # OpenHands needs Python 3.12 (its own requirement); uv fetches one when none is there.
    return f"uv tool install --python 3.12 {package}=={version}"


def lock_folder(harness: str, version: str) -> str:
    return f"{LOCKS}/{harness}/{version}"


def lock_problem(harness: str, version: str, files: Mapping[str, bytes | None]) -> str | None:
    """Why `files` (the lock folder's LOCK_FILES by name, None for a missing one) do not lock
    exactly `version` of the harness's package; None when they do. The one predicate the config
    check, the installs and the tests call."""
    registry, package = PACKAGES[harness]
    missing = [name for name in LOCK_FILES[registry] if files.get(name) is None]
    if missing:
        return f"{', '.join(missing)} missing"
    manifest, lock = (files[name] for name in LOCK_FILES[registry])
    try:
        if registry == "npm":
            wanted = json.loads(manifest).get("dependencies")
            locked = json.loads(lock)["packages"]
            pinned = (locked[""].get("dependencies"), locked[f"node_modules/{package}"]["version"])
        else:
            wanted = {package: dep.removeprefix(f"{package}==") for dep in
                      tomllib.loads(manifest.decode())["project"]["dependencies"]}
            versions = {entry["name"]: entry["version"]
                        for entry in tomllib.loads(lock.decode())["package"]}
            pinned = (wanted, versions[package])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        return f"not a lock of {package} ({error!r})"
    if wanted != {package: version}:
        return f"its manifest asks for {json.dumps(wanted)}, not {package} {version} alone"
    if pinned != ({package: version}, version):
        return f"its lock holds {package} {pinned[1]}, not {version}"
    return None


# How each harness is told to trust the gateway's root certificate (a PEM file), tried against a
# gateway with a private root: without it, none sends a request. The two Node harnesses add it
# to Node's own roots; Codex's Rust client takes a CA file of its own (it honours SSL_CERT_FILE
# too); OpenHands' httpx has only SSL_CERT_FILE, which replaces the default roots.
CA_FILE_ENV = {QWEN_CODE: "NODE_EXTRA_CA_CERTS", CLAUDE_CODE: "NODE_EXTRA_CA_CERTS",
               CODEX: "CODEX_CA_CERTIFICATE", OPENHANDS: "SSL_CERT_FILE"}
# Where a developer's machine keeps that root: `scripts/harness-env --write` puts it there.
DEVELOPER_CA_FILE = "~/.config/spear-fleet/gateway-ca.pem"


def wiring(gateway_url: str, key: str, model: str, versions: dict[str, str],
           window: Window | None, ca_file: str | None = None,
           root_pem: str | None = None) -> dict[str, dict[str, Any]]:
    """harness -> {"env": {...}, "run": how to start it, "version", "install": the command that
    installs that version, "file": {path, content} or absent}. `window` None: the stack knows
    no upstream's window, and each harness keeps its own default. `ca_file`: where the gateway's
    root certificate is, for a gateway whose certificate the system's roots do not sign;
    `root_pem`: that certificate, which each entry then carries ("ca": {path, content}) for a
    developer's machine to write there (a seat mounts it instead)."""
    v1 = f"{gateway_url}/v1"
    codex_toml = (f'model = "{model}"\nmodel_provider = "owned"\n'
                  + (f"model_context_window = {window.context}\n" if window else "")
                  + '\n[model_providers.owned]\nname = "spear-fleet gateway"\n'
                  f'base_url = "{v1}"\nenv_key = "{CODEX_KEY_ENV}"\n'
                  # Codex speaks only Responses; the gateway bridges it onto chat completions.
                  'wire_api = "responses"\n')
    # Codex 0.169 has no output-limit setting, and OpenHands 1.16's CLI reads only its model, URL
    # and key from the environment (its window lives in its saved agent settings): neither sends
    # a limit, and the gateway gives such a request its default (render.DEFAULT_MAX_TOKENS,
    # which the window's max_output never exceeds).
    entries: dict[str, dict[str, Any]] = {
        QWEN_CODE: {"env": {"OPENAI_BASE_URL": v1, "OPENAI_API_KEY": key, "OPENAI_MODEL": model},
                    "run": "qwen"},
        # OpenHands ignores these unless told to prefer them over its saved settings.
        # Its LiteLLM fetches a price list from GitHub at every start unless told to use its own
        # (three tries, 7 s, and a name resolved besides the gateway's).
        OPENHANDS: {"env": {"LLM_MODEL": f"openai/{model}", "LLM_BASE_URL": v1,
                            "LLM_API_KEY": key, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
                    "run": "openhands --override-with-envs"},
        # ANTHROPIC_AUTH_TOKEN is sent as a bearer token, which the gateway's keys are. The
        # model has no thinking mode (seed 001): Claude Code asks for none. Its metrics (the
        # edit decisions behind diff acceptance) go to the gateway only, with the same key;
        # no OTEL_LOGS_EXPORTER: no prompt or event leaves the seat. Without
        # DISABLE_NONESSENTIAL_TRAFFIC, 2.1.328 resolves names of its own on every turn (3 DNS
        # queries, strace'd); with it, nothing but the gateway.
        CLAUDE_CODE: {"env": {"ANTHROPIC_BASE_URL": gateway_url, "ANTHROPIC_AUTH_TOKEN": key,
                              "ANTHROPIC_MODEL": model, "CLAUDE_CODE_DISABLE_THINKING": "1",
                              "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                              "CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "otlp",
                              "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json",
                              "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": gateway_url + HARNESS_METRICS_PATH,
                              "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta",
                              "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer {key}"},
                      "run": "claude"},
        CODEX: {"env": {CODEX_KEY_ENV: key}, "run": "codex",
                "file": {"path": CODEX_CONFIG, "content": codex_toml}},
    }
    # Qwen-Code 0.24.4 sends usage statistics to a collector of its own unless told not to (its
    # turns resolved names besides the gateway's until this was off, strace'd).
    qwen_settings: dict[str, Any] = {"privacy": {"usageStatisticsEnabled": False}}
    if window:
        qwen_settings["model"] = {"generationConfig": {
            "contextWindowSize": window.context,
            "samplingParams": {"max_tokens": window.max_output}}}
    entries[QWEN_CODE]["file"] = {"path": QWEN_SETTINGS,
                                  "content": json.dumps(qwen_settings, indent=2) + "\n"}
    if window:
        # Claude Code takes an unknown model's window from this (else it assumes 1M tokens).
        entries[CLAUDE_CODE]["env"].update({"CLAUDE_CODE_MAX_CONTEXT_TOKENS": str(window.context),
                                            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(window.max_output)})
    for harness, entry in entries.items():
        if ca_file:
            entry["env"][CA_FILE_ENV[harness]] = ca_file
        if ca_file and root_pem:
            entry["ca"] = {"path": ca_file, "content": root_pem}
        entry["version"] = versions[harness]
        entry["install"] = install_command(harness, versions[harness])
    return entries


def developer_key(entries: Mapping[str, Mapping[str, Any]]) -> str:
    """The virtual key a developer's wiring (`wiring`'s value, the `harnesses` output's per
    developer) carries: every harness's entry is given the same one."""
    return entries[QWEN_CODE]["env"]["OPENAI_API_KEY"]


def shell_exports(entry: dict[str, Any]) -> str:
    """`export NAME=value` lines for eval, quoted for the shell."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in entry["env"].items())


# One non-interactive turn of each harness, as a developer's script would run it: the dialect
# check a seat's test makes through the gateway. Every turn of these harnesses offers their own
# tools, so the model may answer with a call, which the harness runs and answers in turn.
TURN_PROMPT = "Read src/app.py and say in one line what it does."
ONE_TURN = {
    QWEN_CODE: ["qwen", "--approval-mode", "plan", TURN_PROMPT],
    CLAUDE_CODE: ["claude", "-p", "--output-format", "json", TURN_PROMPT],
    CODEX: ["codex", "exec", "--skip-git-repo-check", TURN_PROMPT],
    OPENHANDS: ["openhands", "--headless", "--json", "--override-with-envs", "-t", TURN_PROMPT],
}
# The lines of a turn's output that hold the model's answer (an extended regular expression),
# where the rest would hide its absence: OpenHands 1.16 prints a banner and a summary, and exits
# 0, even when every request was refused. With --json each event is a line of its own: the
# model answers in a MessageEvent from the agent, or ends the turn with its `finish` tool.
ANSWER_LINES = {OPENHANDS: '"source": "agent", .*"kind": "(MessageEvent|FinishAction)"'}
# A non-interactive turn whose edits the harness applies without asking (the prompt follows),
# where a developer's script would let it edit: Claude Code's, the one harness whose edit
# decisions the gateway counts (hosts/gateway/spear_gateway/edits.py).
EDIT_TURN = {CLAUDE_CODE: ["claude", "-p", "--permission-mode", "acceptEdits", "--output-format",
                           "json"]}
