"""localhosts/images/harness_install.py: each pinned harness is installed once per (harness, version,
runtime) under $SPEAR_CACHE/harnesses, and reused after (the installers themselves stubbed)."""

from __future__ import annotations

import subprocess

import pytest

from localhosts.images import harness_install


@pytest.fixture
def installs(tmp_path, monkeypatch):
    """The commands run, with node and npm stubbed: `--version` answers, an install succeeds."""
    monkeypatch.setenv("SPEAR_CACHE", str(tmp_path))
    monkeypatch.setattr(harness_install.shutil, "which", lambda name: f"/usr/bin/{name}")
    ran: list[list[str]] = []

    def run(command, **kwargs):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="v20.20.2\n", stderr="")

    monkeypatch.setattr(harness_install.subprocess, "run", run)
    return ran


def npm_installs(ran):
    return [c for c in ran if c[:2] == ["npm", "install"]]


def test_a_node_harness_is_installed_at_its_version_into_a_cached_prefix(installs, tmp_path):
    command = harness_install.install("codex", "0.169.0")
    [npm] = npm_installs(installs)
    assert npm[-1] == "@openai/codex@0.169.0"
    assert npm[npm.index("--prefix") + 1] == str(command.parents[2])
    assert command.parents[3] == tmp_path / "harnesses" and command.name == "codex"


def test_a_second_call_reuses_the_install_and_a_bump_installs_afresh(installs):
    first = harness_install.install("qwen-code", "0.24.4")
    assert harness_install.install("qwen-code", "0.24.4") == first
    assert len(npm_installs(installs)) == 1
    assert harness_install.install("qwen-code", "0.24.5") != first
    assert len(npm_installs(installs)) == 2


def test_openhands_goes_into_a_relocatable_python_312_virtualenv_with_its_bytecode(installs):
    command = harness_install.install("openhands", "1.16.0")
    venv = command.parents[1]
    uv = harness_install.uv()
    assert [uv, "venv", "-q", "--relocatable", "--python", "/usr/bin/python3.12",
            str(venv)] in installs
    assert installs[-1] == [uv, "pip", "install", "-q", "--compile-bytecode", "--python",
                            str(venv / "bin/python"), "openhands==1.16.0"]


def test_a_missing_runtime_is_said_in_one_line(installs, monkeypatch):
    monkeypatch.setattr(harness_install.shutil, "which", lambda name: None)
    with pytest.raises(harness_install.InstallError, match="claude-code needs node on PATH"):
        harness_install.install("claude-code", "2.1.328")


def test_a_python_312_that_does_not_run_is_passed_over_as_a_pyenv_shim_is(installs, monkeypatch):
    """pyenv's shim for python3.12 is on PATH and fails unless pyenv has 3.12 selected."""
    real = harness_install.subprocess.run

    def run(command, **kwargs):
        if command[0] == "/usr/bin/python3.12" and "-c" in command:
            return subprocess.CompletedProcess(command, 127, stdout="", stderr="")
        return real(command, **kwargs)

    monkeypatch.setattr(harness_install.subprocess, "run", run)
    monkeypatch.setattr(harness_install.shutil, "which",
                        lambda name: name if name.startswith("/") else f"/usr/bin/{name}")
    assert harness_install.runtime("openhands") == [harness_install.PYTHON_312[1]]
