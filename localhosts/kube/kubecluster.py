"""The local Kubernetes cluster on this machine: real etcd, kube-apiserver, kube-controller-manager
and kube-scheduler on 127.0.0.1, and one real node (localhosts/kube/kubenode.py: containerd, runc, the
CNI plugins, the kubelet, kube-proxy; and the NetworkPolicy enforcer, localhosts/kube/network_policies.py)
whose pods run real processes from images built here (the pause image below; the fleet's serving
image, localhosts/images/serving_image). The node advertises
`nvidia.com/gpu` capacity (a status patch the kubelet keeps; no device plugin), so the fleet's GPU
requests schedule. The binaries come from localhosts/kube/kubebuild.py (scripts/setup-kubernetes.sh).

One cluster per machine (the node's settings and kube-proxy's tables are machine-wide): `local`,
which the local stack and the test sessions share, each in its own namespaces. Its state folder
`$SPEAR_CACHE/kubecluster/<name>/`: `pki/` (localhosts/kube/kubepki.py), `etcd/`, the node's folders,
`logs/<component>.log`, `kubeconfig` (admin) and `cluster.json` (process group). All its
processes share one process group, so stopping kills every one of them; then the node's cleanup
restores what it changed on the machine.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from components.cache import build_once, cache_dir
from components.hostops.kube_api import KubeApi, cluster_access
from components.hostops.waiting import wait_until
from localhosts.kube import kubebuild, kubenode, kubepki, network_policies
from localhosts.images import oci
from localhosts.servers.processes import terminate
from localhosts.report import HostError

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
START_TIMEOUT = 180.0
STOP_TIMEOUT = 15.0
GPU_RESOURCE = "nvidia.com/gpu"
# Enough for the local stack's fleet (2 replicas x TP 2, a canary, one surge pod) beside a test's.
DEFAULT_GPUS = 16
SERVICE_CIDR = "10.96.0.0/16"
LOCAL_CLUSTER = "local"
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
COMPONENTS = (*CONTROL_PLANE, *kubenode.COMPONENTS)


def log(msg: str) -> None:
    print(f"[kube] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ClusterPorts:
    """The loopback ports the cluster binds (the node's own are in localhosts/kube/kubenode.py)."""

    apiserver: int = 6440
    etcd_client: int = 23790
    etcd_peer: int = 23791
    kubelet: int = kubenode.KUBELET_PORT
    kubelet_healthz: int = kubenode.KUBELET_HEALTHZ
    proxy_metrics: int = kubenode.PROXY_METRICS
    proxy_healthz: int = kubenode.PROXY_HEALTHZ
    network_policies_metrics: int = network_policies.METRICS_PORT

    def taken(self) -> list[str]:
        """'<port> (<what>)' for each port something on this machine listens on already."""
        taken = []
        for what, port in dataclasses.asdict(self).items():
            address = kubenode.NODE_IP if what == "kubelet" else "127.0.0.1"
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((address, port))
                except OSError as exc:
                    if exc.errno != 99:  # the node's address is not up yet: nothing listens on it
                        taken.append(f"{port} ({what})")
        return taken


PORTS = ClusterPorts()


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    server: str  # https://127.0.0.1:<port>
    kubeconfig: Path  # admin credentials, certificates embedded
    state_dir: Path
    node: str
    gpus: int
    pgid: int

    def as_dict(self) -> dict:
        return {"name": self.name, "server": self.server, "kubeconfig": str(self.kubeconfig),
                "state_dir": str(self.state_dir), "node": self.node, "gpus": self.gpus, "pgid": self.pgid}

    def client(self) -> KubeClient:
        return KubeClient(self.kubeconfig)


class KubeClient:
    """The few API calls the cluster's start and its tests need, as the admin user of the
    cluster's kubeconfig, through the client the stack's resources use."""

    def __init__(self, kubeconfig: Path) -> None:
        self.api = KubeApi(cluster_access(None, str(kubeconfig), None))

    def request(self, method: str, path: str, body: dict | list | None = None, timeout: float = 10.0,
                content_type: str = "application/json") -> tuple[int, dict | str]:
        status, _, raw = self.api.request(
            method, path, json.dumps(body).encode() if body is not None else b"",
            {"Content-Type": content_type, "Accept": "application/json"}, timeout)
        text = raw.decode()
        try:
            return status, json.loads(text)
        except json.JSONDecodeError:
            return status, text

    def get(self, path: str) -> dict | None:
        """The object at `path`, or None when there is none (404)."""
        status, body = self.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise HostError(f"GET {path}: HTTP {status}: {body}")
        return body

    def create(self, path: str, obj: dict) -> None:
        status, body = self.request("POST", path, obj)
        if status not in (201, 409):  # 409: it exists already
            raise HostError(f"POST {path}: HTTP {status}: {body}")

    def patch(self, path: str, patch: list) -> dict:
        status, body = self.request("PATCH", path, patch, content_type="application/json-patch+json")
        if status != 200:
            raise HostError(f"PATCH {path}: HTTP {status}: {body}")
        return body

    def ready(self) -> bool:
        try:
            return self.request("GET", "/readyz", timeout=2.0)[0] == 200
        except OSError:
            return False


def node_ready(node: dict | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def state_dir(name: str) -> Path:
    if not NAME_RE.match(name):
        raise HostError(f"invalid cluster name {name!r}: must match {NAME_RE.pattern}")
    return cache_dir() / "kubecluster" / name


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.rename(path)


def pause_image() -> Path:
    """The sandbox image every pod needs, from the pause program built with the cluster's binaries."""
    binary = kubebuild.kubernetes().path("pause")
    out = cache_dir() / "images" / f"pause-{kubebuild.kubernetes().key}.tar"
    build_once(out, lambda: oci.write_image(out, [kubenode.PAUSE_IMAGE], {"/pause": ("file", str(binary), 0o755)},
                                            {"Cmd": ["/pause"]}, "localhosts/kube/kubecluster.py"),
               "the pause image")
    return out


# --- processes ----------------------------------------------------------------------------------

def _command_lines(state: Path) -> dict[str, list[str]]:
    kube, etcd = kubebuild.kubernetes(), kubebuild.etcd()
    missing = [a.name for a in (etcd, kube, kubebuild.node()) if not a.ready()]
    if missing:
        raise HostError(f"the local cluster's binaries are not built ({', '.join(missing)}): "
                        "run scripts/setup-kubernetes.sh")
    pki, kubeconfig = state / "pki", state / "kubeconfig"
    etcd_url = f"http://127.0.0.1:{PORTS.etcd_client}"
    node_kubeconfigs = {user: state / f"{user}.kubeconfig" for user in (kubenode.KUBELET_USER, kubenode.KUBE_PROXY_USER)}
    return {
        "etcd": [str(etcd.path("etcd")), "--name=default", f"--data-dir={state / 'etcd'}",
                 f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
                 f"--listen-peer-urls=http://127.0.0.1:{PORTS.etcd_peer}",
                 f"--initial-advertise-peer-urls=http://127.0.0.1:{PORTS.etcd_peer}",
                 f"--initial-cluster=default=http://127.0.0.1:{PORTS.etcd_peer}",
                 "--unsafe-no-fsync", "--log-level=warn"],
        "kube-apiserver": [
            str(kube.path("kube-apiserver")), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={PORTS.apiserver}",
            f"--cert-dir={pki}", f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}", f"--client-ca-file={pki / 'ca.crt'}",
            "--service-account-issuer=https://kubernetes.default.svc", f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}", f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            # Logs, exec and the service proxy reach the kubelet at the node's IP, as admin.
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={pki / 'admin.crt'}", f"--kubelet-client-key={pki / 'admin.key'}",
            # The reconciler refuses a loopback API server address; pods do not call the API.
            "--endpoint-reconciler-type=none"],
        "kube-controller-manager": [
            str(kube.path("kube-controller-manager")), f"--kubeconfig={kubeconfig}",
            "--leader-elect=false", "--controllers=*,-node-ipam-controller", "--secure-port=0",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false", f"--service-cluster-ip-range={SERVICE_CIDR}"],
        "kube-scheduler": [str(kube.path("kube-scheduler")), f"--kubeconfig={kubeconfig}",
                           "--leader-elect=false", "--secure-port=0"],
        **kubenode.write_configs(state, pki, node_kubeconfigs),
    }


def _members(pgid: int) -> list[int]:
    """The live components of the cluster's process group (a recorded group id alone could by now
    belong to someone else; containerd's shims are the node's cleanup's)."""
    binaries = str(cache_dir() / "kubernetes") + os.sep
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            exe = (proc / "cmdline").read_bytes().split(b"\0")[0].decode()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid and exe.startswith(binaries) \
                and Path(exe).name in COMPONENTS:
            pids.append(int(proc.name))
    return pids


def _record(state: Path) -> dict | None:
    try:
        return json.loads((state / "cluster.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _info(name: str, record: dict) -> ClusterInfo:
    state = state_dir(name)
    return ClusterInfo(name=name, server=f"https://127.0.0.1:{PORTS.apiserver}", kubeconfig=state / "kubeconfig",
                       state_dir=state, node=kubenode.NODE, gpus=record["gpus"], pgid=record["pgid"])


def cluster_status(name: str) -> ClusterInfo | None:
    """The cluster, if every one of its processes runs and its API server is ready."""
    record = _record(state_dir(name))
    if not record or len(_members(record["pgid"])) != len(COMPONENTS):
        return None
    info = _info(name, record)
    return info if info.client().ready() else None


def _terminate(pgid: int, keep: Callable[[int], bool] = lambda pid: False) -> None:
    terminate(lambda: [p for p in _members(pgid) if not keep(p)], STOP_TIMEOUT)


def _component(pid: int) -> str:
    try:
        return Path((Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0].decode()).name
    except OSError:
        return ""


def stop_cluster(name: str) -> None:
    """Stops every process of the cluster and its pods, and restores what the node changed on the
    machine; the cluster's state stays for the next start."""
    state = state_dir(name)
    record = _record(state)
    if record:
        pgid = record["pgid"]
        # The kubelet first, or it restarts what is being stopped; the control plane last.
        _terminate(pgid, keep=lambda pid: _component(pid) not in ("kubelet", "kube-proxy"))
        _terminate(pgid, keep=lambda pid: _component(pid) in CONTROL_PLANE)
        _terminate(pgid)
        (state / "cluster.json").unlink(missing_ok=True)
    if record or kubenode.snapshot_file(state).exists():
        kubenode.cleanup(state)
        log(f"cluster {name} stopped")


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait(what: str, check, procs: dict[str, subprocess.Popen], logs: Path, deadline: float) -> None:
    def done() -> bool:
        if check():
            return True
        for component, proc in procs.items():
            if proc.poll() is not None:
                raise HostError(f"{component} exited with {proc.returncode} while waiting for {what}; "
                                f"{logs / (component + '.log')}:\n{_log_tail(logs / (component + '.log'))}")
        return False

    if not wait_until(done, deadline - time.monotonic(), interval=0.2):
        raise HostError(f"timed out waiting for {what}; logs in {logs}")


def _gpus(node: dict | None) -> str | None:
    return ((node or {}).get("status") or {}).get("capacity", {}).get(GPU_RESOURCE)


def start_cluster(name: str = LOCAL_CLUSTER, gpus: int = DEFAULT_GPUS, images: Sequence[Path] = (), *,
                  fresh: bool = False, timeout: float = START_TIMEOUT) -> ClusterInfo:
    """Starts the cluster (or returns it when it runs already), loads `images` (OCI archives) into
    the node, and waits until its API server is ready and its node is Ready with `gpus` GPUs.
    `fresh` starts from an empty etcd."""
    state = state_dir(name)
    if not fresh and (running := cluster_status(name)):
        kubenode.import_images(list(images))
        return running
    stop_cluster(name)
    if taken := PORTS.taken():
        raise HostError(f"cluster {name}: ports already in use: {', '.join(taken)} (another cluster? only one"
                        " runs per machine: `python -m localhosts.kube.kubecli status NAME`)")
    started = time.monotonic()
    deadline = started + timeout
    state.mkdir(parents=True, exist_ok=True)
    service_ip = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))  # the `kubernetes` Service
    pki = kubepki.ensure_pki(state / "pki", name, service_ip, kubenode.NODE, kubenode.NODE_IP)
    server = f"https://127.0.0.1:{PORTS.apiserver}"
    _write(state / "kubeconfig", kubepki.kubeconfig(pki, server, name))
    for user in (kubenode.KUBELET_USER, kubenode.KUBE_PROXY_USER):
        _write(state / f"{user}.kubeconfig", kubepki.kubeconfig(pki, server, name, user))
    if fresh:
        shutil.rmtree(state / "etcd", ignore_errors=True)
        shutil.rmtree(state / "kubelet", ignore_errors=True)
    (state / "etcd").mkdir(mode=0o700, exist_ok=True)
    logs = state / "logs"
    logs.mkdir(exist_ok=True)
    commands = _command_lines(state)
    archives = [pause_image(), network_policies.ensure_image().archive, *images]

    procs: dict[str, subprocess.Popen] = {}
    pgid = 0  # the first process leads the group every other one joins

    def launch(component: str) -> None:
        nonlocal pgid
        with open(logs / f"{component}.log", "wb") as out:
            proc = subprocess.Popen(commands[component], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=state, process_group=pgid,
                                    env=kubenode.environment())
        procs[component] = proc
        if not pgid:
            pgid = proc.pid
            _write(state / "cluster.json", json.dumps({"pgid": pgid, "gpus": gpus}) + "\n")

    try:
        log(f"starting cluster {name} at {server}")
        kubenode.record_host(state)
        kubenode.add_node_link()
        launch("etcd")
        launch("kube-apiserver")
        launch("containerd")
        client = KubeClient(state / "kubeconfig")
        _wait("containerd", kubenode.SOCKET.exists, procs, logs, deadline)
        kubenode.import_images(archives)
        _wait("the API server", client.ready, procs, logs, deadline)
        for component in ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"):
            launch(component)
        node_path = f"/api/v1/nodes/{kubenode.NODE}"
        _wait(f"node {kubenode.NODE} Ready", lambda: node_ready(client.get(node_path)), procs, logs, deadline)
        # The kubelet keeps an extended resource that a status patch adds (no device plugin here).
        if _gpus(client.get(node_path)) != str(gpus):
            client.patch(f"{node_path}/status", [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu",
                                                  "value": str(gpus)}])
        _wait(f"{gpus} allocatable GPUs", lambda: ((client.get(node_path) or {}).get("status") or {})
              .get("allocatable", {}).get(GPU_RESOURCE) == str(gpus), procs, logs, deadline)
        # Pods are admitted only once their namespace's default service account exists.
        _wait("the default service account",
              lambda: client.get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
              procs, logs, deadline)
        network_policies.install(client, PORTS.apiserver)
        # The node's sandbox runtime, which a stack's agentSandbox.runtimeClass names.
        client.create("/apis/node.k8s.io/v1/runtimeclasses", {
            "metadata": {"name": kubenode.GVISOR_RUNTIME_CLASS}, "handler": kubenode.GVISOR_HANDLER})
        _wait("the NetworkPolicy enforcer", network_policies.enforcing, procs, logs, deadline)
    except BaseException:
        stop_cluster(name)
        raise
    log(f"cluster {name} ready in {time.monotonic() - started:.1f} s (kubeconfig {state / 'kubeconfig'})")
    return _info(name, _record(state))
