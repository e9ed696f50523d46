"""scripts/gate's command line (gate/run.py::main, gate/stack.py): it reads the stack's
rolloutGate with the config check's parser and refuses, touching nothing, a stack whose gate it
cannot run. The run itself is tests/integration/test_rollout_gate.py's and, through the
spear-fleet gateway, tests/integration/test_vllm_fleet_on_kubernetes.py's."""

from __future__ import annotations

import http.server
import json
import os
import ssl
import stat
import threading
import urllib.error
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.tls import root_certificate
from gate import run as gate_run
from gate import stack as gate_stack
from gate.stack import GateStack
from spear import receipts
from tests.support import gate_records as records, tls
from tests.support.config_cases import CANARY_PAIR, MASTER_KEY, STABLE_PAIR


@pytest.fixture()
def pulumi_says(tmp_path, monkeypatch):
    """A `pulumi` on PATH that answers every call with the given vllmFleet."""
    monkeypatch.chdir(records.project(tmp_path))
    return lambda fleet: fake_pulumi(tmp_path, monkeypatch, {
        "": {"spear-fleet:vllmFleet": {"objectValue": fleet}}})


def test_a_stack_without_the_gates_keys_is_refused_naming_them(pulumi_says, capsys):
    pulumi_says({"rolloutGate": records.gate_config()})
    assert gate_run.main(["--stack", "prod"]) == 2
    assert "vllmFleet.rolloutGate.keys must name the stable and the canary track's developers" \
        in capsys.readouterr().err
    assert not os.path.exists(records.RECORDS)  # nothing written


def test_a_bad_gate_policy_is_refused_with_every_problem(pulumi_says, capsys):
    pulumi_says({"rolloutGate": records.gate_config(toolCallSamples=5, concurrency=0)})
    assert gate_run.main(["--stack", "prod"]) == 2
    err = capsys.readouterr().err
    assert "vllmFleet.rolloutGate.policy.toolCallSamples: got 5" in err
    assert "vllmFleet.rolloutGate.policy.concurrency: got 0" in err


def test_without_pulumi_on_path_it_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gate_run.main(["--stack", "prod"]) == 2
    assert "pulumi is not on PATH: run `source scripts/env.sh` first" in capsys.readouterr().err


def test_a_stack_without_a_gate_is_refused_naming_what_is_missing(pulumi_says, capsys):
    pulumi_says({"stable": {"tag": "v0.24.0"}})
    assert gate_run.main(["--stack", "prod"]) == 2
    err = capsys.readouterr().err
    assert "spear-fleet:vllmFleet.rolloutGate.policy: got nothing; allowed: an object with keys alpha," in err
    assert "spear-fleet:vllmFleet.rolloutGate.records: got nothing; allowed: the records folder" in err


def fake_pulumi(tmp_path: Path, monkeypatch, answers: dict[str, Any]) -> None:
    """A `pulumi` on PATH answering each call with the first answer whose word its arguments
    hold (`config`, `stack output gateway`, ...), and nothing else."""
    script = tmp_path / "bin" / "pulumi"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\n" + "".join(
        f"case \"$*\" in *{word}*) cat <<'EOF'\n{json.dumps(answer)}\nEOF\nexit 0;; esac\n"
        for word, answer in answers.items()) + "exit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")


def local_stack(tmp_path, monkeypatch, canary: dict | None = None, deployed: dict | None = None,
                tls_output: dict | None = None):
    """The committed local stack's config (with `canary` declared), its last update having
    deployed `deployed` as the canary; `tls_output`: the gateway output's `tls`, as an in-cluster
    gateway serving TLS has it."""
    monkeypatch.chdir(records.project(tmp_path))
    config = yaml.safe_load((records.REPO / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    fleet = {**config["spear-fleet:vllmFleet"], **({"canary": canary} if canary else {})}
    fake_pulumi(tmp_path, monkeypatch, {
        "harnesses": {who: {"qwen-code": {"env": {"OPENAI_API_KEY": f"sk-{who}"}}}
                      for who in config["spear-fleet:developers"]},
        "gateway": {"url": "http://127.0.0.1:9", "litellm_version": "1.91.1",
                    **({"tls": tls_output} if tls_output else {})},
        "vllm_fleet": {"rollout": {"stable": STABLE_PAIR, "previous": None, "canary": deployed}},
        "config": {"spear-fleet:vllmFleet": {"objectValue": fleet},
                   "spear-fleet:gatewayMasterKey": {"value": MASTER_KEY, "secret": True}},
    })


def test_the_local_stacks_own_gate_reads_its_policy_and_pins_the_canary_as_deployed(
        tmp_path, monkeypatch):
    local_stack(tmp_path, monkeypatch, canary={**CANARY_PAIR, "replicas": 1}, deployed=CANARY_PAIR)
    loaded = gate_stack.load("local")
    assert loaded.key_owners == {"stable": "gate", "canary": "gate-pilot"}
    assert loaded.keys == {"stable": "sk-gate", "canary": "sk-gate-pilot"}
    assert loaded.records == Path("stacks/gate/local")
    assert loaded.policy.tool_call_samples == 100
    assert loaded.candidate_pin(None).pair == tuple(CANARY_PAIR[k] for k in ("tag", "model", "revision"))
    assert loaded.gateway_root is None  # a gateway host without its HTTPS listener
    # The gate judges its record with the key the stack's gateway signs receipts with.
    assert loaded.receipt_key == receipts.receipt_key(MASTER_KEY)


def test_the_gate_takes_a_tls_gateways_root_from_its_output(tmp_path, monkeypatch):
    root = root_certificate(tls.issue("gateway.spear.internal")[0])
    local_stack(tmp_path, monkeypatch, canary={**CANARY_PAIR, "replicas": 1}, deployed=CANARY_PAIR,
                tls_output={"name": "gateway.spear.internal", "root": root})
    assert gate_stack.load("local").gateway_root == root


def test_without_a_canary_the_gate_says_what_to_do_and_sends_nothing(tmp_path, monkeypatch, capsys):
    local_stack(tmp_path, monkeypatch)
    assert gate_run.main(["--stack", "local"]) == 2
    assert "the stack declares no vllmFleet.canary, the pair a record pins: declare it" \
        in capsys.readouterr().err
    assert not Path("stacks/gate/local").exists()


@pytest.mark.parametrize("deployed,found", [
    (None, "no canary"),
    (STABLE_PAIR, "v0.24.0 @ Qwen/Qwen3-Coder-Next-FP8 revision da6e2ed"),
])
def test_a_canary_declared_but_not_deployed_is_never_pinned(tmp_path, monkeypatch, capsys, deployed, found):
    local_stack(tmp_path, monkeypatch, canary={**CANARY_PAIR, "replicas": 1}, deployed=deployed)
    assert gate_run.main(["--stack", "local"]) == 2
    assert ("vllmFleet.canary declares v0.25.0 @ Qwen/Qwen3-Coder-Next-FP8 revision 1234567, but the"
            f" last `pulumi up` deployed {found}: `pulumi up --stack local` first") in capsys.readouterr().err
    assert not Path("stacks/gate/local").exists()


def test_the_candidates_pin_holds_the_harness_versions_the_stack_pins():
    stack = GateStack(policy=None, records=Path("records"), tasks=(), arrivals=(),
                      canary=("v0.25.0", "m", "r"), gateway_url="", gateway_root=None,
                      gateway_address=None, receipt_key=None,
                      keys={}, key_owners={}, installed_version="1.91.1",
                      harness_versions={"qwen-code": "0.24.4", "codex": "0.169.0"})
    pin = stack.candidate_pin(None)
    assert pin.harness_versions == (("codex", "0.169.0"), ("qwen-code", "0.24.4"))
    assert pin.gateway_version == "1.91.1"


@pytest.fixture()
def tls_gateway(tmp_path):
    """An HTTPS server for `localhost` with a private root's certificate, answering chat
    completions as the gateway does; (its URL, the root)."""
    yield from serve_tls(tmp_path, "localhost")


def serve_tls(tmp_path, name):
    """An HTTPS server on 127.0.0.1 with a certificate for `name`: (its URL by name, the root)."""
    bundle, key = tls.issue(name)
    (tmp_path / "bundle.pem").write_text(bundle)
    (tmp_path / "key.pem").write_text(key)

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "bundle.pem", tmp_path / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://{name}:{server.server_address[1]}", root_certificate(bundle)
    server.shutdown()


def test_the_gate_trusts_a_tls_gateways_root_from_the_stack_and_nothing_else(tls_gateway):
    url, root = tls_gateway
    body = {"model": "coder", "messages": [{"role": "user", "content": "hi"}]}
    status, answer, _ = gate_run.Endpoint(url, "sk-gate", root).post(body)
    assert (status, answer["choices"][0]["message"]["content"]) == (200, "ok")
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        gate_run.Endpoint(url, "sk-gate").post(body)


def test_a_gateway_hosts_name_is_reached_at_its_listeners_address_and_still_checked(tmp_path):
    # gateway.spear.internal is in no DNS here: the stack's tls.address says where it listens.
    served = serve_tls(tmp_path, "gateway.spear.internal")
    url, root = next(served)
    body = {"model": "coder", "messages": [{"role": "user", "content": "hi"}]}
    try:
        status, answer, _ = gate_run.Endpoint(url, "sk-gate", root, "127.0.0.1").post(body)
        assert (status, answer["choices"][0]["message"]["content"]) == (200, "ok")
        with pytest.raises(urllib.error.URLError, match="Name or service not known|not known"):
            gate_run.Endpoint(url, "sk-gate", root).post(body)
        # The name is still what the certificate must hold.
        other = url.replace("gateway.spear.internal", "other.spear.internal")
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            gate_run.Endpoint(other, "sk-gate", root, "127.0.0.1").post(body)
    finally:
        next(served, None)
