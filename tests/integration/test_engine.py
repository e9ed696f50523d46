"""The foundation on the real engine: the CLI and language host built from Go modules run a
Python program whose resource changes a real host over SSH, through preview, up, a second up,
an update and destroy, asserting on what the engine reports."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess

import pytest

from components.hostops.ssh import Session
from localhosts.hosts.host import host_key, start_host, stop_host
from localhosts.engine import Project, engine_env, repo_stack


HOST = "it-engine"
SSH_PORT = 2232
STACK = "engine"
PATH_ON_HOST = "/etc/spear-engine-check.conf"

PROGRAM = f'''
import pulumi
from components.hostops.remote_file import RemoteFile, RemoteFileArgs
from components.hostops.ssh import connection_input

config = pulumi.Config()
key = pulumi.Output.secret(open(config.require("keyFile")).read())
conn = pulumi.Output.secret(connection_input("127.0.0.1", {SSH_PORT}, "root", key,
                                            host_key=config.require("hostKey")))
f = RemoteFile("check", RemoteFileArgs(
    connection=conn, path="{PATH_ON_HOST}", content=config.require("content")))
pulumi.export("digest", f.digest)
'''


@pytest.fixture(scope="module")
def env():
    return engine_env()


@pytest.fixture(scope="module")
def host():
    info = start_host(HOST, SSH_PORT)
    yield info
    stop_host(HOST, discard=True)


def test_pulumi_version_is_the_pinned_one(env):
    pulumi = shutil.which("pulumi", path=env["PATH"])
    version = subprocess.run([pulumi, "version"], env=env, capture_output=True, text=True,
                             check=True).stdout.strip()
    if pulumi.startswith(env["SPEAR_CACHE"]):
        assert version == "v3.274.1"
    else:  # a pulumi the user installed is kept, if recent enough
        assert tuple(map(int, version.lstrip("v").split(".")[:2])) >= (3, 272)


def test_preview_up_update_destroy_on_a_real_host(env, host, tmp_path):
    project = Project(tmp_path, env, program=PROGRAM)
    project.pulumi("stack", "init", STACK)
    project.pulumi("config", "set", "--stack", STACK, "keyFile", str(host.private_key_path))
    project.pulumi("config", "set", "--stack", STACK, "content", "first\n")
    project.pulumi("config", "set", "--stack", STACK, "hostKey", host_key(HOST))

    preview = project.preview(STACK)
    assert preview["changeSummary"] == {"create": 2}

    update = project.up(STACK)
    assert update.ok, update.output
    assert update.changes() == {"create": 2}
    assert update.ops() == {"check": "create", f"spear-fleet-{STACK}": "create"}
    outputs = project.outputs(STACK)
    assert outputs["digest"] == hashlib.sha256(b"first\n").hexdigest()
    connection = host.connection()
    with Session(connection) as ssh:
        assert ssh.read(PATH_ON_HOST) == "first\n"

    again = project.up(STACK)
    assert again.ok and again.changes() == {"same": 2}

    project.pulumi("config", "set", "--stack", STACK, "content", "second\n")
    assert project.preview(STACK)["changeSummary"] == {"same": 1, "update": 1}
    changed = project.up(STACK)
    assert changed.ok and changed.ops()["check"] == "update"
    with Session(connection) as ssh:
        assert ssh.read(PATH_ON_HOST) == "second\n"

    # The SSH key went in as a secret: neither state nor preview shows it.
    key_line = host.private_key_path.read_text().splitlines()[1]
    assert key_line not in project.state_text(STACK)

    gone = project.destroy(STACK)
    assert gone.ok and gone.changes() == {"delete": 2}
    with Session(connection) as ssh:
        assert ssh.read(PATH_ON_HOST) is None


@pytest.mark.kubernetes  # prod declares the vLLM fleet: its preview needs the plugin
def test_prod_previews_without_its_hosts_and_never_shows_the_key(tmp_path):
    # prod's host (reds.internal) is unreachable from here: a preview must not need it.
    project = repo_stack(tmp_path, "prod")
    key = project.pulumi("config", "get", "--stack", "prod", "--path", "sshPrivateKeys.reds").stdout
    key_line = key.splitlines()[1]
    shown = project.pulumi("preview", "--stack", "prod", "--diff")
    # No error diagnostic (the fleet's alert rules, shown in the diff, may say "error").
    assert not re.search(r"^\s*error:", shown.stdout + shown.stderr, re.MULTILINE | re.IGNORECASE)
    assert "connection" in shown.stdout and "[secret]" in shown.stdout
    preview = project.preview("prod")
    # The inference host's 10 (stack, component, 8 parts, its host key's record among them) and
    # the vLLM fleet's 17 (component, provider, 15 objects, its dashboard, its ingress policy and
    # the Prometheus Operator's rule and pod monitor among them): the fleet previews although
    # k8s.prod.internal does not resolve here.
    assert preview["changeSummary"] == {"create": 27}
    kinds = {step["urn"].rsplit("::", 1)[1]: step["urn"].split("::")[-2].rsplit("$", 1)[-1]
             for step in preview["steps"]}
    assert kinds["vllm-stable"] == "kubernetes:apps/v1:Deployment"
    assert kinds["vllm-prometheusrule-vllm-alerts"] == "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
    assert kinds["vllm-podmonitor-vllm"] == "kubernetes:monitoring.coreos.com/v1:PodMonitor"
    assert kinds["vllm-cluster"] == "pulumi:providers:kubernetes"
    assert not [d for d in preview.get("diagnostics", []) if d["severity"] == "error"]
    # Nor the fleet's cluster credentials or vLLM's key.
    kubeconfig = project.pulumi("config", "get", "--stack", "prod", "kubeconfig").stdout
    vllm_key = project.pulumi("config", "get", "--stack", "prod", "vllmApiKey").stdout.strip()
    token = next(line for line in kubeconfig.splitlines() if "token:" in line).split(":", 1)[1].strip()
    for text in (shown.stdout, shown.stderr, json.dumps(preview)):
        assert key_line not in text
        assert token not in text and vllm_key not in text
