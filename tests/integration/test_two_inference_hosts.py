"""A stack with two inference hosts on two real systemd hosts (nspawn containers): both are
built, served and smoke-tested by one `pulumi up`; a port clash between them is refused before
anything is registered.

Both hosts share this machine's loopback (and the content-keyed llama.cpp build folder), so
their servers need distinct ports: exactly what the fleet-wide config check enforces.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from components.hostops.ssh import Session
from localhosts import local_stack
from spear.rules import INFERENCE_UNIT, SMOKE_ANSWER
from localhosts.engine import REPO, Project, engine_env

STACK = "pair"
# Ports no other integration test uses: the hosts share this machine's ports.
HOSTS = {"alpha": {"ssh_port": 2241, "server_port": 8111},
         "beta": {"ssh_port": 2242, "server_port": 8112}}
SMOKE = f"end_turn | {SMOKE_ANSWER} | ()"


@pytest.fixture(scope="module")
def hosts():
    started = {name: local_stack.start(f"it-{name}", spec["ssh_port"], fresh=True)
               for name, spec in HOSTS.items()}
    yield started
    for name in HOSTS:
        local_stack.stop(f"it-{name}", discard=True)


def pair_config(hosts: dict[str, Any], beta_port: int) -> dict[str, Any]:
    """The local stack's host twice: alpha and beta, each on its own container."""
    local = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    template = local["spear-fleet:inferenceHosts"]["local"]
    fleet = {}
    for name, spec in HOSTS.items():
        host = copy.deepcopy(template)
        host["ssh"].update(port=spec["ssh_port"], privateKeyPath=str(hosts[name].private_key_path))
        host["server"]["port"] = beta_port if name == "beta" else spec["server_port"]
        fleet[name] = host
    return {"inferenceHosts": fleet}


@pytest.fixture(scope="module")
def project(hosts, tmp_path_factory):
    proj = Project(tmp_path_factory.mktemp("pair"), engine_env())
    proj.new_stack(STACK, pair_config(hosts, HOSTS["beta"]["server_port"]))
    return proj


def test_a_port_clash_between_the_hosts_is_refused_before_anything_is_registered(hosts, tmp_path):
    clash = Project(tmp_path, engine_env())
    clash.new_stack("clash", pair_config(hosts, HOSTS["alpha"]["server_port"]))
    result = clash.pulumi("preview", "--stack", "clash", "--json", check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert ("spear-fleet:inferenceHosts.beta.server.port: got 8111; allowed: a port other than"
            " inferenceHosts.alpha.server.port") in output
    preview = yaml.safe_load(result.stdout)  # JSON is YAML
    assert [step["urn"].rsplit("::", 1)[1] for step in preview.get("steps", [])] in (
        [], ["spear-fleet-clash"])  # at most the root stack: no resource of the program


def test_both_hosts_come_up_serving_and_pass_the_smoke_test(project, hosts):
    preview = project.preview(STACK)
    assert preview["changeSummary"] == {"create": 19}  # the stack, and per host its component and 8 resources
    update = project.up(STACK)
    assert update.ok, update.output[-6000:]
    outputs = project.outputs(STACK)["inference_hosts"]
    assert set(outputs) == set(HOSTS)
    for name, spec in HOSTS.items():
        assert outputs[name]["smoke_test"] == SMOKE
        assert outputs[name]["cgroup"] == f"0::/system.slice/{INFERENCE_UNIT}"
        # The same facts on each host: its own unit answers on its own port.
        info = hosts[name]
        connection = info.connection()
        with Session(connection) as ssh:
            assert ssh.run(f"systemctl is-active {INFERENCE_UNIT}").stdout.strip() == "active"
            status, _ = ssh.http(spec["server_port"], "GET", "/health")
            assert status == 200
    # One build, shared through the content-keyed folder.
    assert outputs["alpha"]["build_key"] == outputs["beta"]["build_key"]


def test_a_second_up_of_the_pair_changes_nothing(project):
    update = project.up(STACK)
    assert update.ok, update.output[-4000:]
    assert update.changes() == {"same": 19}


def test_destroying_the_pair_removes_both_units(project, hosts):
    assert project.destroy(STACK).ok
    for info in hosts.values():
        connection = info.connection()
        with Session(connection) as ssh:
            assert ssh.run(f"test -e /etc/systemd/system/{INFERENCE_UNIT}", check=False).code != 0
