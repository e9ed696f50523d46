"""localhosts/images/harness_install.py: each pinned harness is installed from its committed
lockfile, once per (harness, version, lockfile, runtime) under $SPEAR_CACHE/harnesses, and reused
after (the installers themselves stubbed)."""

from __future__ import annotations

import json
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


def test_a_node_harness_is_installed_from_its_committed_lock_into_a_cached_prefix(installs, tmp_path):
    command = harness_install.install("codex", "0.169.0")
    [npm] = npm_installs(installs)
    prefix = command.parents[2]
    assert npm[npm.index("--prefix") + 1] == str(prefix) and "--no-save" in npm
    # npm installs what the lock beside the manifest holds.
    committed = harness_install.PROJECT / "hosts/seat/harnesses/codex/0.169.0"
    for name in ("package.json", "package-lock.json"):
        assert (prefix / name).read_bytes() == (committed / name).read_bytes()
    assert command.parents[3] == tmp_path / "harnesses" and command.name == "codex"


def test_a_second_call_reuses_the_install_and_a_bump_installs_afresh(installs):
    first = harness_install.install("codex", "0.169.0")
    assert harness_install.install("codex", "0.169.0") == first
    assert len(npm_installs(installs)) == 1
    assert harness_install.install("codex", "0.170.0") != first
    assert len(npm_installs(installs)) == 2


def test_a_new_lock_of_the_same_version_installs_afresh(installs, monkeypatch):
    first = harness_install.install("codex", "0.169.0")
    files = harness_install.lock_files("codex", "0.169.0")
    lock = json.loads(files["package-lock.json"])
    lock["packages"]["node_modules/@openai/codex"]["integrity"] = "sha512-relocked"
    monkeypatch.setattr(harness_install, "lock_files", lambda harness, version: {
        **files, "package-lock.json": json.dumps(lock).encode()})
    assert harness_install.install("codex", "0.169.0") != first


def test_a_version_without_a_committed_lock_is_refused_naming_the_script_that_writes_it(installs):
    with pytest.raises(harness_install.InstallError,
                       match=r"codex 9\.9\.9: its lockfile in hosts/seat/harnesses/codex/9\.9\.9/"
                             r" does not stand \(package\.json, package-lock\.json missing\):"
                             r" scripts/harness-lock codex 9\.9\.9"):
        harness_install.install("codex", "9.9.9")
    assert installs == []


def test_openhands_goes_into_a_relocatable_python_312_virtualenv_from_its_uv_lock(installs):
    command = harness_install.install("openhands", "1.16.0")
    venv, folder = command.parents[1], command.parents[2]
    uv = harness_install.uv()
    assert (folder / "lock/uv.lock").read_bytes() == \
        (harness_install.PROJECT / "hosts/seat/harnesses/openhands/1.16.0/uv.lock").read_bytes()
    requirements = str(folder / "requirements.txt")
    assert installs[-3:] == [
        [uv, "export", "-q", "--frozen", "--no-emit-project", "--format", "requirements-txt",
         "--project", str(folder / "lock"), "--python", "/usr/bin/python3.12", "-o", requirements],
        [uv, "venv", "-q", "--relocatable", "--python", "/usr/bin/python3.12", str(venv)],
        [uv, "pip", "sync", "-q", "--compile-bytecode", "--require-hashes", "--python",
         str(venv / "bin/python"), requirements]]


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


def test_a_lock_is_written_into_the_project_only_when_it_locks_the_version(tmp_path, monkeypatch):
    """npm is stubbed: it writes the lock it resolved into its working folder."""
    resolved = harness_install.lock_files("codex", "0.170.0")["package-lock.json"]
    monkeypatch.setattr(harness_install, "PROJECT", tmp_path)

    def npm(command, cwd, **kwargs):
        assert command[:3] == ["npm", "install", "--package-lock-only"] and "--ignore-scripts" in command
        (cwd / "package-lock.json").write_bytes(resolved)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(harness_install.subprocess, "run", npm)
    folder = harness_install.write_lock("codex", "0.170.0")
    assert folder == tmp_path / "hosts/seat/harnesses/codex/0.170.0"
    assert json.loads((folder / "package.json").read_text())["dependencies"] == {"@openai/codex": "0.170.0"}
    with pytest.raises(harness_install.InstallError, match="its lock holds @openai/codex 0.170.0, not 0.171.0"):
        harness_install.write_lock("codex", "0.171.0")
    assert not (tmp_path / "hosts/seat/harnesses/codex/0.171.0").exists()
