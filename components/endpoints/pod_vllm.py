"""PodVllm: vLLM on a RunPod pod, started in a tmux session over SSH (seed 000 §6.2.7).

It uploads the serve script (hosts/pod/serve-vllm.sh, which holds no deployment values), the
command line spear/vllm.py rendered (`vllm.args`) and the API key (`vllm.env`, mode 0600 in a
folder only root can enter: vLLM reads VLLM_API_KEY from its environment, never from argv), then
(re)starts vLLM in the tmux session `spear-vllm` and waits until it answers, demands the key and
lists the served model.

Its diff is the upgrade: a new revision or flag changes the command line and restarts vLLM, and
the pod stays. The SSH endpoint comes from the pod resource's outputs (RunPod reassigns the port
on every restart), so a pod that restarted is a change too, and `up` starts vLLM there again.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import HostKeyRefused, RemoteError, Session, tail
from components.hostops.waiting import wait_until
from review.kinds import RESTART_VLLM, Change, Kind, changed_keys, mapping_details, updates_only
from spear import tokens, vllm
from spear.vllm import API_KEY_ENV, API_KEY_FILE_MODE

SERVE_SCRIPT = Path(__file__).resolve().parents[2] / "hosts" / "pod" / "serve-vllm.sh"
# On the pod's volume (/workspace), which outlives a restart; the container disk does not.
RUNTIME_DIR = "/workspace/spear"
SESSION = "spear-vllm"
# sshd of a pod that just got its port may take a moment to accept logins.
SSH_WAIT_SECONDS = 300.0


def env_file(runtime_dir: str) -> str:
    return posixpath.join(runtime_dir, "config", "vllm.env")


@dataclass
class PodVllmArgs:
    connection: pulumi.Input[dict]  # secret; host and port from the pod resource's outputs
    pod_id: pulumi.Input[str]
    endpoint: pulumi.Input[dict]  # {host, port}: the pod's SSH endpoint, shown in diffs
    pod_started_at: pulumi.Input[str]  # a restarted pod runs nothing: start vLLM again
    command_line: list[str]
    image: str  # the pod's image: its tag is the engine version the policies read
    api_key: pulumi.Input[str]  # secret
    port: int
    served_model_name: str
    runtime_dir: str = RUNTIME_DIR
    # Downloading and loading ~80 GB of weights takes a while; a tiny model, seconds.
    ready_timeout_seconds: int = 3600


class PodVllmProvider(HostProvider):
    replace_fields = ("pod_id",)  # a new pod: vLLM is started there from scratch
    update_fields = ("endpoint", "pod_started_at", "command_line", "api_key", "script", "port",
                     "served_model_name", "runtime_dir")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['pod_id']}:{SESSION}"

    def stale(self, olds: Mapping[str, Any]) -> bool:
        return olds.get("running") is False  # refresh found it down: `up` starts it again

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        runtime = props["runtime_dir"]
        q = shlex.quote
        with _session(props["connection"]) as host:
            missing = host.run(f"for tool in tmux {q(props['command_line'][0])}; do"
                               " command -v $tool >/dev/null || echo $tool; done").stdout.split()
            if missing:
                raise RemoteError(f"the pod's image lacks {', '.join(missing)}: it must provide"
                                  " sshd (PUBLIC_KEY), tmux and vLLM")
            # Only root may enter config/: the key file is never readable by anyone else,
            # not even while it is written.
            host.run(f"install -d -m 700 {q(runtime)}/config && mkdir -p {q(runtime)}/bin"
                     f" {q(runtime)}/logs")
            host.write(f"{runtime}/bin/serve-vllm.sh", props["script"], 0o755)
            host.write(f"{runtime}/config/vllm.args", "\n".join(props["command_line"]) + "\n")
            host.write(env_file(runtime), f"{API_KEY_ENV}={q(props['api_key'])}\n",
                       API_KEY_FILE_MODE)
            _stop(host, int(props["port"]))
            log = f"{runtime}/logs/vllm.log"
            host.run(f"tmux new-session -d -s {SESSION}"
                     f" {q(f'{q(runtime)}/bin/serve-vllm.sh 2>&1 | tee -a {q(log)}')}")
            models = _wait_ready(host, props, log)
        return {**props, "started_at": time.time(), "running": True, "models": models}

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        try:
            with Session(props["connection"], connect_timeout=10) as host:
                running = _session_alive(host) and _healthy(host, int(props["port"]))
                args = host.read(f"{props['runtime_dir']}/config/vllm.args")
        except HostKeyRefused:
            raise  # not a stopped pod: another host answers there
        except RemoteError:
            # The pod stopped or moved (a new SSH port): whatever ran there is gone.
            return ReadResult(id_=id_, outs={**props, "running": False})
        command_line = args.splitlines() if args is not None else []
        return ReadResult(id_=id_, outs={**props, "running": running, "command_line": command_line})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        try:
            with Session(props["connection"], connect_timeout=10) as host:
                host.run(f"tmux kill-session -t {SESSION} 2>/dev/null;"
                         f" rm -f {shlex.quote(env_file(props['runtime_dir']))}")
        except RemoteError:
            pass  # the pod is stopped or gone: nothing runs there, and its deletion takes the file


def _session(connection: dict[str, Any]) -> Session:
    deadline = time.monotonic() + SSH_WAIT_SECONDS
    while True:
        try:
            return Session(connection)
        except HostKeyRefused:
            raise  # no wait makes another key the right one
        except RemoteError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(3)


def _session_alive(host: Session) -> bool:
    return host.run(f"tmux has-session -t {SESSION}", check=False).code == 0


def _healthy(host: Session, port: int) -> bool:
    try:
        return host.http(port, "GET", "/health", timeout=10)[0] == 200
    except ConnectionError:
        return False


def _stop(host: Session, port: int) -> None:
    """Ends the session, then waits until nothing answers on the port (the old server is gone)."""
    host.run(f"tmux kill-session -t {SESSION} 2>/dev/null; true")
    if not wait_until(lambda: not _healthy(host, port), 60):
        raise RemoteError(f"something still answers on port {port} after vLLM was stopped")


def _wait_ready(host: Session, props: Mapping[str, Any], log: str) -> list[str]:
    """Waits for /health while the session lives; then checks the key is demanded and the
    served model listed. Returns the model ids vLLM lists."""
    port = int(props["port"])

    def failed(why: str) -> RemoteError:
        logged = host.run(f"tail -n 40 {shlex.quote(log)}", check=False).stdout
        return RemoteError(f"vLLM {why} (tmux session {SESSION}); {log} ends:\n{tail(logged)}")

    def healthy() -> bool:
        if _healthy(host, port):
            return True
        if not _session_alive(host):
            raise failed("exited")
        return False

    if not wait_until(healthy, float(props["ready_timeout_seconds"]), interval=2):
        raise failed(f"is not healthy after {props['ready_timeout_seconds']} s")
    status, _ = host.http(port, "POST", "/v1/chat/completions", b"{}", timeout=30)
    if status != 401:
        raise RemoteError(f"vLLM answered a request without the API key with HTTP {status}:"
                          f" it must demand {API_KEY_ENV}")
    status, body = host.http(port, "GET", "/v1/models", timeout=30,
                             headers={"Authorization": f"Bearer {props['api_key']}"})
    models = [model.get("id") for model in json.loads(body).get("data") or []] if status == 200 else []
    if props["served_model_name"] not in models:
        raise RemoteError(f"vLLM lists {models or body[:200]!r} (HTTP {status}), not the served"
                          f" model name {props['served_model_name']!r}")
    return models


@updates_only
def _pod_vllm_details(change: Change) -> list[str]:
    old, new = change.old, change.new
    lines = mapping_details(vllm.flags(old.get("command_line") or []),
                            vllm.flags(new.get("command_line") or []))
    if old.get("endpoint") != new.get("endpoint"):
        lines.append("the pod's SSH endpoint changed (a restarted pod): vLLM is started there")
    return lines + [f"`{k}` changed" for k in changed_keys(old, new)
                    if k not in ("command_line", "endpoint", "pod_started_at")]


KIND = Kind.of(tokens.POD_VLLM, "vLLM on the pod", RESTART_VLLM, details=_pod_vllm_details)

class PodVllm(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.POD_VLLM.name):
    started_at: pulumi.Output[float]
    running: pulumi.Output[bool]
    models: pulumi.Output[list]

    def __init__(self, name: str, args: PodVllmArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            PodVllmProvider(),
            name,
            {
                "connection": args.connection,
                "pod_id": args.pod_id,
                "endpoint": args.endpoint,
                "pod_started_at": args.pod_started_at,
                "runtime_dir": args.runtime_dir,
                "session": SESSION,
                "script": SERVE_SCRIPT.read_text(),
                "command_line": args.command_line,
                "image": args.image,
                "api_key": args.api_key,
                # Where the key goes instead of argv, for the policy that checks it.
                "env_file": {"path": env_file(args.runtime_dir), "mode": API_KEY_FILE_MODE,
                             "variable": API_KEY_ENV},
                "port": args.port,
                "served_model_name": args.served_model_name,
                "ready_timeout_seconds": args.ready_timeout_seconds,
            },
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                additional_secret_outputs=["api_key"])),
            outputs=("started_at", "running", "models"),
        )
