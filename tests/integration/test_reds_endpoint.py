"""The REDS endpoint on real parts: a local systemd host stands in for the REDS host, reached by
an ~/.ssh/config alias (a temporary ssh_config file stands in for ~/.ssh/config), and on it
someone starts llama-server by hand, as the seed says to, serving the local stack's scripted tiny
model with --jinja. spear-fleet installs nothing there: it checks through the tunnel, proves the
endpoint (the cookbook's three probes, the smoke test) and leaves the server alone.

The scenario tests form one stack and run in file order: each starts from the state the previous
one left. The last test previews an endpoint that points at a managed inference host instead.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from components.cache import cache_dir
from spear.probes import COMPLETION, MODEL_LIST, TOOL_CALL
from components.hostops.ssh import SSH_CONFIG_ENV, Session
from localhosts import local_stack
from localhosts.standins import tiny_model
from localhosts.hosts.host import HostInfo
from spear import tokens
from review.kinds import RECHECK
from review.parts import overall, parts
from spear.rules import SMOKE_ANSWER
from localhosts.engine import Project, engine_env, without_inference_hosts
from tests.support.served_llama import SERVER_FLAGS
from tests.support.llama_build import local_stack_llama_server
from tests.support.stack_files import local_inference_hosts

STACK = "reds"
ENDPOINT = "box"
HOST = "it-reds"
# Ports no other integration test uses: the local hosts share this machine's network.
SSH_PORT = 2280
SERVER_PORT = 8145
ALIAS = "reds-it"  # the stack names the host by this alias only
SERVED = "spear-reds"  # the --alias the person starting the server gives it
BY_HAND_UNIT = "reds-by-hand"
MODEL_ON_HOST = "/srv/reds/spear-smoke.gguf"
SMOKE = f"end_turn | {SMOKE_ANSWER} | ()"
NOTHING_ANSWERS = (
    f"reds endpoint {ENDPOINT}: nothing answers on 127.0.0.1:{SERVER_PORT} on {ALIAS} (connection"
    " refused). Start the inference server on that host yourself (spear-fleet installs nothing on"
    f" a REDS host), or fix redsEndpoints.{ENDPOINT}.port")
# Where an installer would leave something; the build cache is a bind mount of this machine's.
WATCHED = ("/etc", "/opt", "/usr/local", "/srv", "/root", "/home", "/var/lib", "/tmp")
MARKER = "/run/reds-it-marker"


@pytest.fixture(scope="module")
def host() -> Iterator[HostInfo]:
    yield local_stack.start(HOST, SSH_PORT, fresh=True)
    local_stack.stop(HOST, discard=True)


def session(info: HostInfo) -> Session:
    return Session(info.connection())


@pytest.fixture(scope="module")
def ssh(host) -> Iterator[Session]:
    with session(host) as connection:
        yield connection


@pytest.fixture(scope="module")
def project(host, tmp_path_factory) -> Project:
    workdir = tmp_path_factory.mktemp("reds")
    ssh_config = workdir / "ssh_config"
    ssh_config.write_text(f"Host {ALIAS}\n    HostName {host.ssh_host}\n    Port {host.ssh_port}\n"
                          f"    User {host.user}\n    IdentityFile {host.private_key_path}\n")
    proj = without_inference_hosts(workdir, {**engine_env(), SSH_CONFIG_ENV: str(ssh_config)})
    config = local_inference_hosts()
    # Left out by the program (its key is still read); its backend moves so the endpoint gets
    # the seed's `reds` port.
    config["inferenceHosts"]["local"].update(backend="local")
    config["inferenceHosts"]["local"]["ssh"]["privateKeyPath"] = str(host.private_key_path)
    config["redsEndpoints"] = {ENDPOINT: {"ssh": {"host": ALIAS}, "port": SERVER_PORT}}
    proj.new_stack(STACK, config)
    return proj


def start_by_hand(ssh: Session) -> None:
    """What the person running the REDS host does: the model on the host, llama-server started."""
    binary = local_stack_llama_server().relative_to(cache_dir() / "llama-builds")
    if ssh.read(MODEL_ON_HOST) is None:
        ssh.upload(str(tiny_model.ensure_model(SMOKE_ANSWER)), MODEL_ON_HOST)
    command = [f"{local_stack.RUNTIME_DIR}/builds/{binary}", "-m", MODEL_ON_HOST, *SERVER_FLAGS,
               "--jinja", "--alias", SERVED, "--host", "127.0.0.1", "--port", str(SERVER_PORT)]
    ssh.run(f"systemd-run --unit {BY_HAND_UNIT} {shlex.join(command)}")
    ssh.run(f"for i in $(seq 60); do curl -sf http://127.0.0.1:{SERVER_PORT}/health && exit;"
            " sleep 1; done; exit 1")


def mark(ssh: Session) -> None:
    ssh.run(f"touch {MARKER}")


def written_since_mark(ssh: Session) -> list[str]:
    """Files and folders changed on the host since mark(), outside the bind-mounted build cache."""
    return ssh.run(f"find {' '.join(WATCHED)} -path {local_stack.RUNTIME_DIR}/builds -prune"
                   f" -o -newer {MARKER} -print").stdout.split()


def endpoint_state(project: Project) -> list[dict[str, Any]]:
    """The stack's resources of the endpoint (itself and its children), as state records them."""
    resources = json.loads(project.state_text(STACK))["deployment"].get("resources") or []
    return [r for r in resources
            if r["urn"].rsplit("::", 1)[1] in (ENDPOINT, *(f"{ENDPOINT}-{part}" for part in
                                                          ("check", "verification", "smoke-test")))]


def endpoint_outputs(project: Project) -> dict[str, Any]:
    return project.outputs(STACK)["reds_endpoints"][ENDPOINT]


def test_up_where_nothing_answers_stops_saying_so_and_records_and_writes_nothing(project, ssh):
    mark(ssh)
    update = project.up(STACK)
    assert not update.ok
    assert NOTHING_ANSWERS in update.output
    # The engine records a component when it is registered, so the (empty) component is there;
    # the failed check, and what would have come after it, are not.
    assert [r["type"] for r in endpoint_state(project)] == [tokens.REDS_ENDPOINT]
    assert written_since_mark(ssh) == []


def test_up_with_the_server_started_by_hand_records_its_model_and_proves_it(project, ssh):
    mark(ssh)
    start_by_hand(ssh)
    assert MODEL_ON_HOST in written_since_mark(ssh)  # what the person wrote is seen
    mark(ssh)
    update = project.up(STACK)
    assert update.ok, update.output[-6000:]
    out = endpoint_outputs(project)
    assert (out["model_id"], out["model_ids"]) == (SERVED, [SERVED])
    assert out["verified"] == [MODEL_LIST, COMPLETION, TOOL_CALL]
    assert out["smoke_test"] == SMOKE
    assert (out["ssh_host"], out["remote_port"], out["backend"]) == (
        ALIAS, SERVER_PORT, {"name": "reds", "client_port": 8082})
    assert written_since_mark(ssh) == []


def test_a_second_up_changes_nothing(project):
    assert overall(parts(project.preview(STACK, "--show-sames"))) == "no changes"
    update = project.up(STACK)
    assert update.ok, update.output[-4000:]
    assert set(update.changes()) == {"same"}


def test_refresh_notices_a_stopped_server_and_up_checks_it_again(project, ssh):
    ssh.run(f"systemctl stop {BY_HAND_UNIT}")
    assert project.refresh(STACK).ok
    found = {p.resource: p for p in parts(project.preview(STACK))}
    check = found[f"{ENDPOINT}-check"]
    assert (check.change, check.details[0]) == (RECHECK, f"refresh found: {NOTHING_ANSWERS}")
    update = project.up(STACK)
    assert not update.ok and NOTHING_ANSWERS in update.output
    start_by_hand(ssh)
    update = project.up(STACK)
    assert update.ok, update.output[-6000:]
    assert {name: op for name, op in update.ops().items() if name.startswith(f"{ENDPOINT}-")} == {
        f"{ENDPOINT}-host-key": "same", f"{ENDPOINT}-check": "update",
        f"{ENDPOINT}-verification": "update", f"{ENDPOINT}-smoke-test": "update"}
    assert endpoint_outputs(project)["smoke_test"] == SMOKE


def test_destroy_leaves_the_server_started_by_hand_running(project, ssh):
    mark(ssh)
    destroy = project.destroy(STACK)
    assert destroy.ok, destroy.output[-4000:]
    assert endpoint_state(project) == []
    assert ssh.run(f"systemctl is-active {BY_HAND_UNIT}").stdout.strip() == "active"
    assert ssh.http(SERVER_PORT, "GET", "/health")[0] == 200
    assert written_since_mark(ssh) == []


def test_an_endpoint_on_a_managed_inference_host_is_checked_after_that_host(tmp_path):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = local_inference_hosts()
    config["inferenceHosts"]["local"]["ssh"]["privateKeyPath"] = str(key)
    config["redsEndpoints"] = {"near": {"inferenceHost": "local"}}
    managed = Project(tmp_path, engine_env())
    managed.new_stack("managed", config)
    steps = {step["urn"].rsplit("::", 1)[1]: step for step in managed.preview("managed")["steps"]}
    host_parts = {name for name, step in steps.items()
                  if name.startswith("local-") and step["newState"].get("custom")}
    assert {"local-unit", "local-smoke-test", "local-verification"} <= host_parts
    check = steps["near-check"]["newState"]
    assert check["type"] == tokens.REDS_TUNNEL_CHECK.type
    assert {urn.rsplit("::", 1)[1] for urn in check["dependencies"]} >= host_parts
    assert (check["inputs"]["ssh_host"], check["inputs"]["port"], check["inputs"]["managed_by"]) == (
        "127.0.0.1", 8010, "local")
    later = [steps[f"near-{part}"]["newState"]["dependencies"] for part in ("verification", "smoke-test")]
    assert all(steps["near-check"]["urn"] in dependencies for dependencies in later)
