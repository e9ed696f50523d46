"""The committed examples' passphrase is public: only the local stack may be deployed under it.
Any other stack's `up` is refused before a resource exists, naming PULUMI_CONFIG_PASSPHRASE; its
preview (the examples in review) goes on, marked as an example; scripts/env.sh refuses it for a
PULUMI_STACK other than local, in one line."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from localhosts.engine import REPO, Project, engine_env
from spear.rules import EXAMPLE_PASSPHRASE
from tests.support.stack_files import local_inference_hosts


@pytest.fixture
def project(tmp_path):
    proj = Project(tmp_path, engine_env())
    proj.env["PULUMI_CONFIG_PASSPHRASE"] = EXAMPLE_PASSPHRASE
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    hosts = local_inference_hosts()
    for host in hosts["inferenceHosts"].values():
        host["ssh"]["privateKeyPath"] = str(key)
    for stack in ("team", "local"):
        proj.new_stack(stack, hosts)
    return proj


def resources(project: Project, stack: str) -> list[dict]:
    return json.loads(project.state_text(stack))["deployment"].get("resources") or []


def test_up_of_a_stack_other_than_local_under_the_example_passphrase_is_refused_before_anything_exists(project):
    update = project.up("team")
    assert not update.ok
    assert "PULUMI_CONFIG_PASSPHRASE: got the public example passphrase" in update.output
    assert [r["type"] for r in resources(project, "team")] in ([], ["pulumi:pulumi:Stack"])


def test_its_preview_goes_on_marked_as_an_example(project):
    result = project.pulumi("preview", "--stack", "team", check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "example stack: team's secrets are under the public example passphrase" in result.stdout
    local = project.pulumi("preview", "--stack", "local")
    assert "example stack" not in local.stdout


def test_a_passphrase_of_its_own_is_not_marked(project):
    project.env["PULUMI_CONFIG_PASSPHRASE"] = "a-team-passphrase"
    team = yaml.safe_load((project.dir / "stacks" / "Pulumi.team.yaml").read_text())["config"]
    project.new_stack("ours", {key.removeprefix("spear-fleet:"): value for key, value in team.items()})
    result = project.pulumi("preview", "--stack", "ours")
    assert "example stack" not in result.stdout


@pytest.mark.parametrize("stack,passphrase,refused", [
    ("prod", None, True), ("prod", EXAMPLE_PASSPHRASE, True), ("prod", "ours", False),
    ("local", None, False), ("", None, False)])
def test_env_sh_refuses_the_example_passphrase_for_a_named_stack_other_than_local(stack, passphrase, refused):
    env = {**engine_env(), "PULUMI_STACK": stack}
    env.pop("PULUMI_CONFIG_PASSPHRASE", None)
    if passphrase is not None:
        env["PULUMI_CONFIG_PASSPHRASE"] = passphrase
    done = subprocess.run(["bash", "-c", "source scripts/env.sh && echo sourced"], cwd=REPO,
                          env=env, capture_output=True, text=True)
    if refused:
        assert (done.returncode, done.stdout) == (1, "")
        [line] = done.stderr.splitlines()
        assert line.startswith("PULUMI_CONFIG_PASSPHRASE: ") and stack in line
    else:
        assert (done.returncode, done.stdout) == (0, "sourced\n"), done.stderr
