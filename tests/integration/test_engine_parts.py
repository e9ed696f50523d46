"""The engine's parts are the upstream ones: the CLI runs the upstream Python language host, the
`command` provider plugin (pulumi-command) works through the real engine, and a fresh clone needs
nothing but `source scripts/env.sh` before a preview with the policy pack."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from localhosts.engine import REPO, Project, engine_env, upstream_source_env
from tests.support.checkout import working_tree_copy

pytestmark = pytest.mark.integration

SETUP_ENGINE = (REPO / "scripts" / "setup-engine.sh").read_text()
PULUMI_COMMIT = re.search(r"^pulumi_commit=(\w+)$", SETUP_ENGINE, re.M).group(1)

COMMAND_PROGRAM = '''
import pulumi
from pulumi_command import local

marker = pulumi.Config().require("marker")
hello = local.Command("hello", create=f"touch {marker} && echo hello from the command provider",
                      delete=f"rm {marker}")
pulumi.export("stdout", hello.stdout)
'''


@pytest.fixture(scope="module")
def env():
    return engine_env()


def test_the_engine_runs_the_upstream_python_language_host(env, tmp_path):
    project = Project(tmp_path, env, program="import pulumi\n")
    about = json.loads(project.pulumi("about", "--json").stdout)
    language_hosts = {p["name"]: p["version"] for p in about["plugins"] if p["kind"] == "language"}
    if shutil.which("pulumi", path=env["PATH"]).startswith(env["SPEAR_CACHE"]):
        assert project.pulumi("version").stdout.strip() == "v3.274.1"
        assert language_hosts["python"] == f"3.274.1+upstream.{PULUMI_COMMIT[:7]}"
    else:  # a release the user installed, with the language host it bundles
        assert language_hosts["python"] == about["cliAbout"]["version"]


def test_a_local_command_is_created_exports_its_stdout_and_is_destroyed(env, tmp_path):
    project = Project(tmp_path, env, program=COMMAND_PROGRAM)
    marker = tmp_path / "created-by-command"
    project.new_stack("cmd", {"marker": str(marker)})

    up = project.up("cmd")
    assert up.ok, up.output[-4000:]
    assert up.ops()["hello"] == "create"
    assert marker.exists()
    assert project.outputs("cmd") == {"stdout": "hello from the command provider"}

    destroy = project.destroy("cmd")
    assert destroy.ok, destroy.output[-4000:]
    assert destroy.ops()["hello"] == "delete"
    assert not marker.exists()  # the provider ran the delete command
    assert "command:local:Command" not in project.state_text("cmd")


def test_a_fresh_clone_previews_with_the_policy_pack_after_only_sourcing_env_sh(tmp_path):
    """What a clone of this working tree holds, without any virtualenv: the language host creates
    .venv from requirements.txt on the first preview, and env.sh the policy pack's (without which
    the preview hangs). A trivial program, so the fleet's own config is not what is tested."""
    clone = working_tree_copy(REPO, tmp_path / "clone")
    assert not (clone / ".venv").exists() and not (clone / "policies" / ".venv").exists()
    (clone / "__main__.py").write_text('import pulumi\n\npulumi.export("answer", 42)\n')
    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{state}",
           "PULUMI_CONFIG_PASSPHRASE": "test-passphrase", **upstream_source_env()}

    log = tmp_path / "preview.log"
    with log.open("w") as out:  # a file, not a pipe: a hung plugin cannot hold the test
        result = subprocess.run(
            ["bash", "-c", "source scripts/env.sh && pulumi stack init t && "
             "timeout -k 10 600 pulumi preview --stack t --policy-pack policies --non-interactive"],
            cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=900)
    output = log.read_text()
    assert result.returncode == 0, output[-6000:]
    assert (clone / ".venv" / "bin" / "python").exists()
    assert (clone / "policies" / ".venv" / "bin" / "python").exists()
    ran_the_pack = r"^Policies:\n\s+\S+ spear-fleet@v[\d.]+ \(local: policies\)$"
    assert re.search(ran_the_pack, output, re.M), output[-6000:]
