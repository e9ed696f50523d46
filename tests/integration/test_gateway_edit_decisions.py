"""Diff acceptance from a real harness: Claude Code at the stack's pinned version, wired by
spear/harness.py with a developer's key, runs one turn through spear-fleet's gateway on real
LiteLLM (database mode). The fleet is a stand-in that answers like a model using Claude Code's
Write tool, so the harness really writes (or is refused writing) a file; Claude Code then
reports that edit decision over OpenTelemetry to the gateway, which counts it against the key's
owner on /metrics (spear_gateway/edits.py). What the receiver refuses is sent to it over HTTP.
"""

import json
import os
import re
import subprocess
import urllib.error
import urllib.request

import pytest

from components.hostops.waiting import wait_until
from localhosts.images import harness_install
from localhosts.standins.frontier_standin import FrontierStandin
from localhosts.servers.litellm_proxy import migrate
from localhosts.servers.litellm_venv import TESTED_LITELLM, litellm_venv
from localhosts.standins.openai_upstream import OpenAIUpstream
from localhosts.servers.postgres import postgres_database
from localhosts.servers.spear_gateway_proxy import FRONTIER_KEY, gateway_config, metric, spear_proxy
from spear import harness
from spear.rules import CODER_MODEL, HARNESS_METRICS_PATH

# LiteLLM version: (proxy port, first of two stand-in ports: the fleet, the frontier)
VERSIONS = dict(zip(TESTED_LITELLM, ((4140, 8190), (4141, 8192))))
FILE = "hello.py"
CONTENT = "print('hello from the fleet')\n"
EXPORTS = os.path.join(os.path.dirname(__file__), "..", "unit", "gateway", "data")


@pytest.fixture(scope="module", params=list(VERSIONS))
def gateway(request, tmp_path_factory):
    """(proxy, keys of ana and bob, the fleet's stand-in, the working copy the harness edits)."""
    proxy_port, first = VERSIONS[request.param]
    venv = litellm_venv(request.param).path
    workspace = tmp_path_factory.mktemp(f"workspace-{request.param}")
    write = ("Write", {"file_path": str(workspace / FILE), "content": CONTENT})
    with postgres_database() as db, \
            OpenAIUpstream(first, reply="Wrote it.", tool_call=write) as upstream, \
            FrontierStandin(first + 1, FRONTIER_KEY) as frontier:
        migrate(venv, db.url)
        # Priced so a turn's worst case (Claude Code asks for 4096 output tokens) fits a budget.
        config = gateway_config(upstream.base_url, frontier.base_url, coder_prices=(0.0, 1e-6))
        with spear_proxy(venv, config, port=proxy_port, hatch_cap_usd=10.0,
                         log_dir=tmp_path_factory.mktemp(f"edit-decisions-{request.param}"),
                         database_url=db.url) as proxy:
            keys = {who: proxy.post("/key/generate", {
                "models": [CODER_MODEL], "max_budget": 10.0, "budget_duration": "30d",
                "metadata": {"developer": who, "team": "platform"}})["key"]
                for who in ("ana", "bob")}
            yield proxy, keys, upstream, workspace


# strace's rendering of a connect(2) to an IPv4/IPv6 address or a Unix socket.
CONNECT = re.compile(r'connect\(\d+, \{sa_family=AF_(?:INET6?|UNIX), (?:sin6?_port=htons\((\d+)\),'
                     r'.*?inet_(?:addr|pton)\((?:AF_INET6, )?"([^"]+)"|sun_path="([^"]+)")')


def traced(gateway, name, arguments):
    """`arguments` of the harness `name` run in the working copy with ana's wiring (its file in
    a HOME of its own), under strace: (its output, every address it connected to)."""
    proxy, keys, _, workspace = gateway
    command = harness_install.install(name, harness.DEFAULT_VERSIONS[name])
    wiring = harness.wiring(proxy.base_url, keys["ana"], CODER_MODEL, harness.DEFAULT_VERSIONS,
                            harness.Window(32768, 4096))[name]
    home = workspace.parent / f"home-{name}"
    if "file" in wiring:
        path = home / wiring["file"]["path"].removeprefix("~/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wiring["file"]["content"])
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), **wiring["env"]}
    trace = workspace.parent / f"connects-{name}.txt"
    done = subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(trace),
                           str(command), *arguments], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    connects = {(found[2] or f"{found[1]}:{found[0]}") for found in CONNECT.findall(trace.read_text())}
    return done.stdout, connects


def turn(gateway, *flags):
    """One non-interactive Claude Code turn asking for the file: (its JSON answer, connects)."""
    output, connects = traced(gateway, harness.CLAUDE_CODE, [
        "-p", *flags, "--output-format", "json", f"Create {FILE} that prints a greeting."])
    return json.loads(output), connects


def decisions(proxy, decision):
    return metric(proxy, "spear_edit_decisions_total", developer="ana", team="platform",
                  harness="claude-code", tool="Write", decision=decision, source="config")


def test_an_edit_the_harness_accepted_is_counted_against_the_developer_who_made_it(gateway):
    proxy, _, upstream, workspace = gateway
    answer, connects = turn(gateway, "--permission-mode", "acceptEdits")
    assert (workspace / FILE).read_text() == CONTENT  # the real harness wrote it
    # Its turn and its metrics went to the gateway, and nowhere else: no name resolved (no
    # nscd, no DNS), no other address (the wiring's CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC).
    assert connects == {f"127.0.0.1:{proxy.port}"}, connects
    assert answer["permission_denials"] == [] and answer["result"] == "Wrote it."
    # The stand-in saw the Write call's result come back: the whole turn went through LiteLLM.
    assert any(m.get("role") == "tool" for c in upstream.calls for m in c.body["messages"])
    assert wait_until(lambda: decisions(proxy, "accept") == 1, timeout=30), \
        "the accepted edit is not on the gateway's /metrics"
    assert decisions(proxy, "reject") == 0


def test_an_edit_the_harness_refused_is_counted_as_a_reject(gateway):
    proxy, _, _, workspace = gateway
    (workspace / FILE).unlink()
    answer, _ = turn(gateway)  # -p without acceptEdits: nobody can approve the write
    assert not (workspace / FILE).exists()
    assert [d["tool_name"] for d in answer["permission_denials"]] == ["Write"]
    assert wait_until(lambda: decisions(proxy, "reject") == 1, timeout=30), \
        "the refused edit is not on the gateway's /metrics"
    assert decisions(proxy, "accept") == 1


def test_qwen_code_wired_so_connects_to_the_gateway_alone(gateway):
    # Its settings file turns its own usage statistics off (without it, 0.24.4 resolves names
    # of its own on every turn); the system bus is a local socket it probes for a keyring.
    output, connects = traced(gateway, harness.QWEN_CODE,
                              ["--approval-mode", "plan", "Say in one line what you can do."])
    assert "Wrote it." in output  # the stand-in's reply, through the gateway
    assert connects - {"/run/dbus/system_bus_socket"} == {f"127.0.0.1:{gateway[0].port}"}, connects


def send(proxy, body, key, content_type="application/json"):
    req = urllib.request.Request(f"{proxy.base_url}{HARNESS_METRICS_PATH}", data=body,
                                 method="POST", headers={"Content-Type": content_type,
                                                         **({"Authorization": f"Bearer {key}"}
                                                            if key else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def recorded_export():
    with open(os.path.join(EXPORTS, "claude-code-2.1.328-edit-accept.json"), "rb") as f:
        return f.read()


def test_a_report_without_a_live_key_or_in_another_format_counts_nothing(gateway):
    proxy, keys, _, _ = gateway
    before = metric(proxy, "spear_edit_decisions_total", developer="bob", team="platform",
                    harness="claude-code", tool="Write", decision="accept", source="config")
    assert send(proxy, recorded_export(), None)[0] == 401
    assert send(proxy, recorded_export(), "sk-not-a-key-of-this-gateway")[0] == 401
    status, answer = send(proxy, recorded_export(), keys["bob"], "application/x-protobuf")
    assert status == 415 and "http/json" in answer["message"]
    cumulative = json.loads(recorded_export())
    for resource in cumulative["resourceMetrics"]:
        for scope in resource["scopeMetrics"]:
            for m in scope["metrics"]:
                m.get("sum", {})["aggregationTemporality"] = 2
    status, answer = send(proxy, json.dumps(cumulative).encode(), keys["bob"])
    assert status == 400 and "TEMPORALITY_PREFERENCE=delta" in answer["message"]
    proxy.post("/key/block", {"key": keys["bob"]})
    assert send(proxy, recorded_export(), keys["bob"])[0] == 401
    assert metric(proxy, "spear_edit_decisions_total", developer="bob", team="platform",
                  harness="claude-code", tool="Write", decision="accept", source="config") == before
    # The same export with a live key counts: the refusals above were about the key and format.
    assert send(proxy, recorded_export(), keys["ana"]) == (200, {})
