"""scripts/harness-env (gate/harness_env.py) prints one (developer, harness) of the wiring
(spear/harness.py) from a sample of `pulumi stack output harnesses --show-secrets --json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest

from config.tls import root_certificate
from gate import harness_env
from spear import harness
from tests.support.stack_files import REPO
from tests.support.tls import issue

URL = "http://127.0.0.1:4000"
KEY = "sk-ana-virtual-key"
WINDOW = harness.Window(context=32768, max_output=4096)
WIRING = harness.wiring(URL, KEY, "coder", harness.DEFAULT_VERSIONS, WINDOW)


@pytest.fixture
def outputs(tmp_path):
    path = tmp_path / "harnesses.json"
    path.write_text(json.dumps({"ana": WIRING, "bob": harness.wiring(URL, "sk-bob", "coder", harness.DEFAULT_VERSIONS, WINDOW)}))
    return str(path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = harness_env.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_printed_exports_set_the_harness_variables_when_evaluated(outputs, capsys):
    code, out, _ = run(capsys, "ana", "qwen-code", "--outputs-json", outputs)
    assert code == 0
    env = subprocess.run(["bash", "-c", out + 'printf "%s\\n" "$OPENAI_BASE_URL" "$OPENAI_API_KEY"'
                          ' "$OPENAI_MODEL"'], capture_output=True, text=True, check=True).stdout
    assert env.splitlines() == [f"{URL}/v1", KEY, "coder"]
    assert "# install it: npm install -g @qwen-code/qwen-code@0.24.4\n" in out
    assert out.rstrip().endswith("# then run: qwen")


def test_codex_prints_where_its_config_goes_and_the_content_as_comments(outputs, capsys):
    code, out, _ = run(capsys, "ana", "codex", "--outputs-json", outputs)
    assert code == 0
    assert f"export OWNED_API_KEY={KEY}\n" in out
    assert "# ~/.codex/config.toml (write it with --write), with this content:\n" in out
    assert '#   wire_api = "responses"\n' in out
    # Still eval-able: everything but the exports is a comment.
    subprocess.run(["bash", "-n", "-c", out], check=True)


def test_a_gateway_with_a_private_root_is_trusted_from_the_file_write_puts_under_home(
        tmp_path, capsys, monkeypatch):
    root = root_certificate(issue("gateway.spear.internal")[0])
    path = tmp_path / "harnesses.json"
    path.write_text(json.dumps({"ana": harness.wiring(
        "https://gateway.spear.internal:4000", KEY, "coder", harness.DEFAULT_VERSIONS, WINDOW,
        harness.DEVELOPER_CA_FILE, root)}))
    monkeypatch.setenv("HOME", str(tmp_path))
    ca = tmp_path / ".config" / "spear-fleet" / "gateway-ca.pem"
    code, out, _ = run(capsys, "ana", "claude-code", "--outputs-json", str(path))
    assert code == 0 and not ca.exists()
    # The variable names the file for this user (no harness expands ~); the root is printed.
    assert f"export NODE_EXTRA_CA_CERTS={ca}\n" in out
    assert ("# ~/.config/spear-fleet/gateway-ca.pem (write it with --write), with this content:\n"
            "#   -----BEGIN CERTIFICATE-----\n") in out
    subprocess.run(["bash", "-n", "-c", out], check=True)
    code, out, _ = run(capsys, "ana", "codex", "--write", "--outputs-json", str(path))
    assert code == 0 and f"# wrote {ca}\n" in out and ca.read_text() == root
    assert f"export CODEX_CA_CERTIFICATE={ca}\n" in out


def test_codex_write_puts_the_config_file_in_place(outputs, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, _ = run(capsys, "ana", "codex", "--write", "--outputs-json", outputs)
    assert code == 0
    written = tmp_path / ".codex" / "config.toml"
    assert f"# wrote {written}\n" in out
    assert tomllib.loads(written.read_text())["model_providers"]["owned"]["wire_api"] == "responses"
    assert run(capsys, "ana", "codex", "--write", "--outputs-json", outputs)[0] == 0  # same: fine
    written.write_text('model = "other"\n')
    code, _, err = run(capsys, "ana", "codex", "--write", "--outputs-json", outputs)
    assert code == 2 and "exists with other content" in err
    assert written.read_text() == 'model = "other"\n'


def test_an_unknown_developer_is_refused_naming_the_developers(outputs, capsys):
    code, out, err = run(capsys, "zed", "qwen-code", "--outputs-json", outputs)
    assert (code, out) == (2, "")
    assert err == "harness-env: developer 'zed' has no key in this stack; allowed: ana, bob\n"


def test_an_unknown_harness_is_refused_naming_the_harnesses(outputs, capsys):
    code, out, err = run(capsys, "ana", "cursor", "--outputs-json", outputs)
    assert (code, out) == (2, "")
    assert err == ("harness-env: harness 'cursor' is not wired; allowed: qwen-code, openhands,"
                   " claude-code, codex\n")


def test_the_stack_output_is_read_with_secrets_shown(capsys):
    asked = []

    def stack_output(stack):
        asked.append(stack)
        return json.dumps({"ana": WIRING})

    assert harness_env.main(["ana", "claude-code", "--stack", "prod"], stack_output) == 0
    assert asked == ["prod"]
    assert "--show-secrets" in harness_env.STACK_OUTPUT
    assert f"export ANTHROPIC_AUTH_TOKEN={KEY}\n" in capsys.readouterr().out


def test_the_script_is_a_thin_entry_point(outputs):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "harness-env"), "bob",
                           "openhands", "--outputs-json", outputs],
                          capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert "export LLM_API_KEY=sk-bob\n" in done.stdout
    bad = subprocess.run([sys.executable, str(REPO / "scripts" / "harness-env"), "bob", "vim",
                          "--outputs-json", outputs], capture_output=True, text=True)
    assert bad.returncode == 2 and "allowed: qwen-code" in bad.stderr
