"""A stand-in for RunPod's REST API v1, for tests: an HTTP server on 127.0.0.1 that follows the
published contract (CONTRACT) for the pod endpoints spear-fleet uses.

Every request is checked against the contract: the bearer key (a missing or wrong one is 401 with
the contract's UnauthorizedError shape), the path and query parameters, and the JSON body against
the operation's schema (PodCreateInput, PodUpdateInput): an unknown field, a wrong type, a value
outside an enum or range is 400, `{"error": ..., "status": 400}` (the contract gives no body for
it). Every answer is a Pod object that the stand-in checks against the Pod schema before sending.

Each pod is a machine (PodMachines). In the integration tests that is a local systemd host (an
nspawn container from localhosts) whose sshd moves to a new port on every start, as RunPod
reassigns a pod's SSH port on every restart; unit tests use machines that only hand out ports.
Like RunPod, the API answers at once and the machine boots behind it: a pod reports its public IP
and port mappings only once its sshd is up.
"""

from __future__ import annotations

import datetime
import itertools
import json
import re
import secrets
import shutil
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from localhosts.hosts.host import HostInfo, start_host, stop_host
from localhosts.standins.tiny_model import ensure_model
from spear.rules import SMOKE_ANSWER
from localhosts.hosts.llama_build import local_stack_llama_server
from localhosts.images.serving_image import vllm_standin
from localhosts.images.serving_image.build import MAX_CTX

CONTRACT = Path("/work/shared/contracts/runpod-rest-v1.openapi.json")
PUBLIC_IP = "127.0.0.1"  # the machines share this machine's network
_PORT_SPEC = re.compile(r"([0-9]{1,5})/(http|tcp)")  # the contract's description of `ports`
Step = Callable[[], None]


# ---------------------------------------------------------------------------------------------
# The contract and a small checker of its schemas


class Contract:
    """The OpenAPI document, and the errors a value has against one of its schemas."""

    def __init__(self, path: Path = CONTRACT) -> None:
        if not path.is_file():
            raise FileNotFoundError(f"RunPod's API contract is not at {path}: the stand-in follows"
                                    " it and cannot answer without it")
        self.doc = json.loads(path.read_text())

    def schema(self, name: str) -> dict[str, Any]:
        return self.doc["components"]["schemas"][name]

    def _resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in schema:
            schema = self.schema(schema["$ref"].rsplit("/", 1)[1])
        return schema

    def errors(self, schema: Mapping[str, Any], value: Any, where: str) -> list[str]:
        """What is wrong with value under schema (JSON Schema's subset the contract uses).

        The contract never says additionalProperties; like RunPod, a field it does not name is
        refused rather than silently dropped. An object schema with `items` (the contract's
        `env`) is a map whose values follow `items`.
        """
        schema = self._resolve(schema)
        if value is None:
            return [] if schema.get("nullable") else [f"{where}: null is not allowed"]
        kind = schema.get("type")
        wrong = {"object": not isinstance(value, dict), "array": not isinstance(value, list),
                 "string": not isinstance(value, str), "boolean": not isinstance(value, bool),
                 "integer": isinstance(value, bool) or not isinstance(value, int),
                 "number": isinstance(value, bool) or not isinstance(value, (int, float))}
        if wrong.get(kind):
            return [f"{where}: expected {kind}, got {type(value).__name__}"]
        problems = []
        if "enum" in schema and value not in schema["enum"]:
            problems.append(f"{where}: {value!r} is not one of the allowed values")
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: {value} is above the maximum {schema['maximum']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than {schema['maxLength']} characters")
        if kind == "array":
            problems += [p for i, item in enumerate(value)
                         for p in self.errors(schema.get("items", {}), item, f"{where}[{i}]")]
        elif kind == "object" and "properties" in schema:
            known = schema["properties"]
            problems += [f"{where}.{key}: unknown field" for key in value if key not in known]
            problems += [p for key, item in value.items() if key in known
                         for p in self.errors(known[key], item, f"{where}.{key}")]
        elif kind == "object" and "items" in schema:
            problems += [p for key, item in value.items()
                         for p in self.errors(schema["items"], item, f"{where}.{key}")]
        return problems

    def query_errors(self, operation: Mapping[str, Any], query: Mapping[str, list[str]]) -> list[str]:
        """Query parameters the operation does not declare, or whose values do not parse."""
        declared = {p["name"]: p["schema"] for p in operation.get("parameters", ())
                    if p["in"] == "query"}
        problems = [f"query {name}: unknown parameter" for name in query if name not in declared]
        for name, values in query.items():
            kind = declared.get(name, {}).get("type")
            if kind == "boolean" and any(v not in ("true", "false") for v in values):
                problems.append(f"query {name}: expected true or false")
        return problems


# ---------------------------------------------------------------------------------------------
# The machines behind the pods


class PodMachines(Protocol):
    def start(self, pod_id: str, public_key: str | None) -> int:
        """Boots the pod's machine with PUBLIC_KEY authorised; returns its sshd's new port."""

    def stop(self, pod_id: str) -> None: ...

    def remove(self, pod_id: str) -> None:
        """Stops the machine and deletes its disk."""


class PortsOnly:
    """Machines that are only ports: for tests of the API itself."""

    def __init__(self, first_port: int = 40000) -> None:
        self._ports = itertools.count(first_port)
        self.running: dict[str, int] = {}

    def start(self, pod_id: str, public_key: str | None) -> int:
        self.running[pod_id] = next(self._ports)
        return self.running[pod_id]

    def stop(self, pod_id: str) -> None:
        self.running.pop(pod_id, None)

    def remove(self, pod_id: str) -> None:
        self.stop(pod_id)


# Inside a pod: where the vllm stand-in (the serving image's program) finds llama-server and the
# model (its config file names them), and where it is installed.
STANDIN_DIR = "/opt/vllm-standin"
STANDIN_CONFIG = "/etc/vllm-standin.json"
VLLM_STANDIN = Path(vllm_standin.__file__)
# The model ids the pods' vllm serves (the tiny smoke model for each).
POD_MODELS = ("Qwen/Qwen3-Coder-Next-FP8",)


class NspawnPods:
    """Each pod a local systemd host `pod-<id>`, booted with sshd on a new port of `ports` at every
    start; its root filesystem (the container disk, and /workspace on it) is kept across restarts
    and deleted with the pod. `vllm` on its PATH is the vllm stand-in, serving the tiny model."""

    def __init__(self, ports: Iterable[int]) -> None:
        self.ports = list(ports)
        self._last: dict[str, int] = {}  # pod -> the port it had last
        self._hosts: dict[str, HostInfo] = {}  # running pods
        self._folders: dict[str, Path] = {}  # pod -> its host's folder (root filesystem, keys)
        self._lock = threading.Lock()
        llama_server = local_stack_llama_server()
        self._model = ensure_model(SMOKE_ANSWER)
        self.binds = [(str(llama_server.parent), f"{STANDIN_DIR}/llama"),
                      (str(self._model.parent), f"{STANDIN_DIR}/models"),
                      (str(VLLM_STANDIN.parent), f"{STANDIN_DIR}/bin")]

    def _new_port(self, pod_id: str) -> int:
        with self._lock:
            taken = {info.ssh_port for info in self._hosts.values()} | {self._last.get(pod_id)}
            start = self.ports.index(self._last[pod_id]) + 1 if pod_id in self._last else 0
            for port in self.ports[start:] + self.ports[:start]:
                if port not in taken:
                    self._last[pod_id] = port
                    return port
        raise RuntimeError(f"no free SSH port left for pod {pod_id} in {self.ports}")

    def start(self, pod_id: str, public_key: str | None) -> int:
        first = pod_id not in self._last
        info = start_host(f"pod-{pod_id}", self._new_port(pod_id), self.binds, fresh=first)
        # What RunPod's images do at start: authorise PUBLIC_KEY for root.
        if public_key:
            with open(info.root_dir / "root/.ssh/authorized_keys", "a") as keys:
                keys.write(public_key.strip() + "\n")
        # 127.0.0.1: the pods share this machine's network.
        gguf = f"{STANDIN_DIR}/models/{self._model.name}"
        (info.root_dir / STANDIN_CONFIG.lstrip("/")).write_text(json.dumps({
            "llama_server": f"{STANDIN_DIR}/llama/llama-server", "host": "127.0.0.1",
            "models": {model: {"gguf": gguf, "flags": [], "max_ctx": MAX_CTX}
                       for model in POD_MODELS}}))
        vllm = info.root_dir / "usr/local/bin/vllm"
        vllm.unlink(missing_ok=True)
        vllm.symlink_to(f"{STANDIN_DIR}/bin/{VLLM_STANDIN.name}")
        with self._lock:
            self._hosts[pod_id] = info
            self._folders[pod_id] = info.root_dir.parent
        return info.ssh_port

    def stop(self, pod_id: str) -> None:
        with self._lock:
            info = self._hosts.pop(pod_id, None)
        if info is not None:
            stop_host(info.name)

    def remove(self, pod_id: str) -> None:
        self.stop(pod_id)
        folder = self._folders.pop(pod_id, None)
        if folder is not None:
            shutil.rmtree(folder)


# ---------------------------------------------------------------------------------------------
# The API


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Pod:
    """A pod as the stand-in keeps it; `view()` is its Pod object."""
    id: str
    fields: dict[str, Any]  # the create input as given, updated by PATCH
    status: str = "RUNNING"
    ssh_port: int | None = None  # set once the machine is up
    last_started_at: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # one machine operation at a time

    def view(self) -> dict[str, Any]:
        gpu_ids = self.fields.get("gpuTypeIds") or []
        up = self.status == "RUNNING" and self.ssh_port is not None
        return {
            "id": self.id,
            "name": self.fields.get("name", "my pod"),
            "image": self.fields.get("imageName", ""),
            "desiredStatus": self.status,
            "env": dict(self.fields.get("env") or {}),
            "ports": list(self.fields.get("ports") or ["8888/http", "22/tcp"]),
            "portMappings": {"22": self.ssh_port} if up else {},
            "publicIp": PUBLIC_IP if up else None,
            "containerDiskInGb": self.fields.get("containerDiskInGb", 50),
            "volumeInGb": self.fields.get("volumeInGb", 20),
            "volumeMountPath": self.fields.get("volumeMountPath", "/workspace"),
            "gpu": {"id": gpu_ids[0] if gpu_ids else "", "count": self.fields.get("gpuCount", 1),
                    "displayName": gpu_ids[0] if gpu_ids else ""},
            "interruptible": self.fields.get("interruptible", False),
            "locked": self.fields.get("locked", False),
            "costPerHr": 0.0,
            "lastStartedAt": self.last_started_at or "",
            "lastStatusChange": f"{self.status} at {_now()}",
            "machineId": f"standin-{self.id}",
        }


class RunPodApiStandIn:
    """The API on 127.0.0.1 (an ephemeral port); `url` is its base, like https://rest.runpod.io/v1.

    Use as a context manager: closing it waits for the machines' operations and removes every
    machine it made."""

    def __init__(self, api_key: str, machines: PodMachines, contract: Contract | None = None) -> None:
        self.api_key = api_key
        self.machines = machines
        self.contract = contract or Contract()
        self.pods: dict[str, Pod] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path) as received, for tests
        self._operations: list[threading.Thread] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)  # a short poll: closing is quick

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RunPodApiStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.wait_idle()
        for pod_id in list(self.pods):
            self.machines.remove(pod_id)

    def wait_idle(self, timeout: float = 300.0) -> None:
        """Waits until every machine operation started so far has finished."""
        for operation in list(self._operations):
            operation.join(timeout)

    # -- what the routes do: each changes the pod's record at once and answers with it; the
    # machine's work (the steps) runs behind the answer, as on RunPod.

    def _background(self, pod: Pod, steps: tuple[Step, ...]) -> None:
        def run() -> None:
            with pod.lock:
                for step in steps:
                    step()
        thread = threading.Thread(target=run, daemon=True)
        self._operations.append(thread)
        thread.start()

    def _boot(self, pod: Pod) -> Step:
        def boot() -> None:
            port = self.machines.start(pod.id, (pod.fields.get("env") or {}).get("PUBLIC_KEY"))
            pod.ssh_port, pod.last_started_at = port, _now()
        return boot

    def _restart(self, pod: Pod) -> tuple[Step, ...]:
        """What a reset, a restart and an update of a running pod do: new machine start, new port."""
        pod.status, pod.ssh_port = "RUNNING", None
        return (lambda: self.machines.stop(pod.id)), self._boot(pod)

    def create(self, body: dict[str, Any]) -> tuple[int, Pod, tuple[Step, ...]]:
        pod = Pod(id="".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                             for _ in range(14)), fields=body)
        self.pods[pod.id] = pod
        return 201, pod, (self._boot(pod),)

    def update(self, pod: Pod, body: dict[str, Any]) -> tuple[int, Pod, tuple[Step, ...]]:
        pod.fields.update(body)
        return 200, pod, self._restart(pod) if pod.status == "RUNNING" else ()

    def action(self, pod: Pod, verb: str) -> tuple[int, Pod, tuple[Step, ...]]:
        if verb == "stop" and pod.status == "RUNNING":
            pod.status, pod.ssh_port = "EXITED", None
            return 200, pod, (lambda: self.machines.stop(pod.id),)
        if verb == "start" and pod.status != "RUNNING":
            pod.status = "RUNNING"
            return 200, pod, (self._boot(pod),)
        if verb in ("restart", "reset"):
            return 200, pod, self._restart(pod)
        return 200, pod, ()

    def delete(self, pod: Pod) -> tuple[int, Pod, tuple[Step, ...]]:
        del self.pods[pod.id]
        return 204, pod, (lambda: self.machines.remove(pod.id),)

    # -- HTTP

    def route(self, method: str, path: str, query: dict[str, list[str]], headers: Mapping[str, str],
              body: bytes) -> tuple[int, Any]:
        self.requests.append((method, path))
        if headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"message": "Unauthorized: missing or invalid bearer API key"}
        parts = path.removeprefix("/v1").strip("/").split("/")
        template = ("/pods", "/pods/{podId}", f"/pods/{{podId}}/{parts[-1]}", None)[
            min(len(parts), 4) - 1]
        operations = self.contract.doc["paths"].get(template) if parts[0] == "pods" else None
        if operations is None:
            return 404, _error(404, f"no pod route {path}")
        operation = operations.get(method.lower())
        if operation is None:
            return 405, _error(405, f"{method} {template} is not in the contract")
        problems = self.contract.query_errors(operation, query)
        document = None
        if "requestBody" in operation:
            try:
                document = json.loads(body)
            except ValueError:
                problems.append("body: a JSON object is required")
            else:
                schema = operation["requestBody"]["content"]["application/json"]["schema"]
                problems += self.contract.errors(schema, document, "body") + _port_errors(document)
        elif body:
            problems.append("body: this operation takes none")
        if problems:
            return 400, _error(400, "; ".join(problems))
        if template == "/pods":
            if method != "POST":
                return 501, _error(501, "listing pods is not implemented by the stand-in")
            return self._answer(*self.create(document))
        pod = self.pods.get(parts[1])
        if pod is None:
            return 404, _error(404, f"pod {parts[1]} not found")
        if template == "/pods/{podId}":
            return self._answer(*{"GET": lambda: (200, pod, ()),
                                  "PATCH": lambda: self.update(pod, document),
                                  "DELETE": lambda: self.delete(pod)}[method]())
        if parts[2] == "update":
            return self._answer(*self.update(pod, document))
        return self._answer(*self.action(pod, parts[2]))

    def _answer(self, status: int, pod: Pod, steps: tuple[Step, ...]) -> tuple[int, Any]:
        """The pod as a Pod object of the contract (checked; none after a delete), then its
        machine's steps started."""
        answer = None if status == 204 else pod.view()
        if answer is not None:
            problems = self.contract.errors(self.contract.schema("Pod"), answer, "answer")
            assert not problems, f"the stand-in answered off contract: {problems}"
        if steps:
            self._background(pod, steps)
        return status, answer

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer = api.route(self.command, url.path,
                                           urllib.parse.parse_qs(url.query, keep_blank_values=True),
                                           self.headers, body)
                data = b"" if answer is None else json.dumps(answer).encode()
                self.send_response(status)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

            def log_message(self, *args: object) -> None:  # quiet: tests read `requests`
                return None

        return Handler


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error": message, "status": status}


def _port_errors(document: Any) -> list[str]:
    """What the contract says in words rather than schema: a port is [port number]/[protocol]."""
    ports = document.get("ports") if isinstance(document, dict) else None
    return [f"body.ports[{i}]: {port!r} is not [port number]/[http|tcp]"
            for i, port in enumerate(ports if isinstance(ports, list) else [])
            if isinstance(port, str) and not _PORT_SPEC.fullmatch(port)]
