"""A local Kubernetes cluster on 127.0.0.1: real etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, and kwok for the nodes. No kubelet and no container runtime: kwok fakes the nodes
(each with `nvidia.com/gpu` capacity) and moves the pods scheduled on them through their life, so
objects are validated, admitted, scheduled and rolled out by real Kubernetes, and containers never
run. The binaries come from localhosts/kubebuild.py (scripts/setup-kubernetes.sh).

Each cluster has a name and a state folder `$SPEAR_CACHE/kubecluster/<name>/`: `pki/` (a CA, the
API server's certificate for IP 127.0.0.1, an admin client certificate in `system:masters`, the
service-account key pair; made once and reused), `etcd/` (the data), `logs/<component>.log`,
`kubeconfig` (admin, certificates embedded) and `cluster.json` (ports and process ids). All its
processes share one process group, so stopping kills every one of them.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import http.client
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from localhosts import kubebuild
from localhosts.report import HostError
from spear.cache import cache_dir

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
# The fake nodes: kwok manages exactly the nodes with this annotation; the taint keeps every pod
# that does not tolerate it (i.e. does not expect a fake node) off them.
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
FAKE_NODE_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
GPU_RESOURCE = "nvidia.com/gpu"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
# The local stack's cluster (slot 0: API server on 6440); test sessions take the other slots.
LOCAL_CLUSTER = "local"
LOCAL_SLOT = 0
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def log(msg: str) -> None:
    print(f"[kube] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ClusterPorts:
    """The loopback ports one cluster binds. Slots 0-4 fit the ranges reserved for Kubernetes
    (etcd 23790-23799, API servers 6440-6459, the rest 10250-10299); `local` uses slot 0."""

    apiserver: int
    etcd_client: int
    etcd_peer: int
    kwok: int

    SLOTS = 5

    @classmethod
    def slot(cls, n: int) -> ClusterPorts:
        if not 0 <= n < cls.SLOTS:
            raise HostError(f"cluster port slot {n}: allowed 0-{cls.SLOTS - 1}")
        return cls(apiserver=6440 + n, etcd_client=23790 + 2 * n, etcd_peer=23791 + 2 * n, kwok=10250 + n)

    def taken(self) -> list[str]:
        """'<port> (<what>)' for each port something on this machine listens on already."""
        taken = []
        for what, port in dataclasses.asdict(self).items():
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    taken.append(f"{port} ({what})")
        return taken


@dataclass(frozen=True)
class FakeNodes:
    """kwok nodes, each advertising these resources (GPUs as `nvidia.com/gpu`)."""

    count: int = 1
    gpus: int = 8
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = 110

    def names(self) -> list[str]:
        return [f"fake-gpu-{i}" for i in range(self.count)]


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    server: str  # https://127.0.0.1:<port>
    kubeconfig: Path  # admin credentials, certificates embedded
    state_dir: Path
    nodes: tuple[str, ...]
    ports: ClusterPorts
    pgid: int

    def as_dict(self) -> dict:
        return {"name": self.name, "server": self.server, "kubeconfig": str(self.kubeconfig),
                "state_dir": str(self.state_dir), "nodes": list(self.nodes),
                "ports": dataclasses.asdict(self.ports), "pgid": self.pgid}

    def client(self) -> KubeClient:
        return KubeClient(self.server, self.state_dir / "pki")


class KubeClient:
    """The few API calls the cluster's start and its tests need, as the admin user."""

    def __init__(self, server: str, pki: Path) -> None:
        self.host, port = server.removeprefix("https://").split(":")
        self.port = int(port)
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.context.load_cert_chain(pki / "admin.crt", pki / "admin.key")

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 10.0) -> tuple[int, dict | str]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=timeout)
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers={"Content-Type": "application/json", "Accept": "application/json"})
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        try:
            return response.status, json.loads(text)
        except json.JSONDecodeError:
            return response.status, text

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


# --- certificates -------------------------------------------------------------------------------

def _pki(folder: Path, name: str) -> Path:
    """The cluster's certificates and keys, made once (all or nothing) and reused."""
    if (folder / ".complete").exists():
        return folder
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    tmp = Path(tempfile.mkdtemp(prefix="pki.tmp.", dir=folder.parent))
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    ten_years = now + datetime.timedelta(days=3650)

    def key(file: str) -> rsa.RSAPrivateKey:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (tmp / file).write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
        (tmp / file).chmod(0o600)
        return private

    def subject(cn: str, org: str | None = None) -> x509.Name:
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
        return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = key("ca.key")
    ca_name = subject(f"spear-fleet {name} CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(ten_years)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    (tmp / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def leaf(file: str, cn: str, usage: ExtendedKeyUsageOID, org: str | None = None,
             san: list[x509.GeneralName] | None = None) -> None:
        private = key(f"{file}.key")
        builder = (x509.CertificateBuilder().subject_name(subject(cn, org)).issuer_name(ca_name)
                   .public_key(private.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(ten_years)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        (tmp / f"{file}.crt").write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))

    service_ip = next(ipaddress.ip_network(SERVICE_CIDR).hosts())  # the `kubernetes` Service
    leaf("apiserver", "kube-apiserver", ExtendedKeyUsageOID.SERVER_AUTH, san=[
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(service_ip),
        *(x509.DNSName(d) for d in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"))])
    leaf("admin", "admin", ExtendedKeyUsageOID.CLIENT_AUTH, org="system:masters")
    sa = key("sa.key")
    (tmp / "sa.pub").write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))
    (tmp / ".complete").touch()
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


def _kubeconfig(pki: Path, server: str, name: str) -> str:
    def data(file: str) -> str:
        return base64.b64encode((pki / file).read_bytes()).decode()

    context = f"spear-{name}"
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": data("ca.crt")}}],
        "users": [{"name": f"{context}-admin", "user": {"client-certificate-data": data("admin.crt"),
                                                        "client-key-data": data("admin.key")}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-admin"}}],
    }, indent=2) + "\n"


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.rename(path)


# --- processes ----------------------------------------------------------------------------------

def _command_lines(state: Path, ports: ClusterPorts) -> dict[str, list[str]]:
    control_plane = kubebuild.control_plane()
    etcd, kwok = kubebuild.etcd(), kubebuild.kwok()
    missing = [a.name for a in (etcd, control_plane, kwok) if not a.ready()]
    if missing:
        raise HostError(f"the local cluster's binaries are not built ({', '.join(missing)}): "
                        "run scripts/setup-kubernetes.sh")
    pki, kubeconfig = state / "pki", state / "kubeconfig"
    etcd_url = f"http://127.0.0.1:{ports.etcd_client}"
    # Controllers that need a kubelet or a network plugin are off: kwok is the kubelet here.
    controllers = "*,-node-ipam-controller,-node-lifecycle-controller"
    return {
        "etcd": [str(etcd.path("etcd")), "--name=default", f"--data-dir={state / 'etcd'}",
                 f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
                 f"--listen-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
                 f"--initial-advertise-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
                 f"--initial-cluster=default=http://127.0.0.1:{ports.etcd_peer}",
                 "--unsafe-no-fsync", "--log-level=warn"],
        "kube-apiserver": [
            str(control_plane.path("kube-apiserver")), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={ports.apiserver}",
            f"--cert-dir={state / 'pki'}", f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}", f"--client-ca-file={pki / 'ca.crt'}",
            "--service-account-issuer=https://kubernetes.default.svc", f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}", f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            # No kubelet keeps an Endpoints object for the API server itself.
            "--endpoint-reconciler-type=none",
            # Otherwise a new node keeps a not-ready:NoSchedule taint that only the (disabled)
            # node-lifecycle controller removes, and every pod stays Pending.
            "--disable-admission-plugins=TaintNodesByCondition"],
        "kube-controller-manager": [
            str(control_plane.path("kube-controller-manager")), f"--kubeconfig={kubeconfig}",
            "--leader-elect=false", f"--controllers={controllers}", "--secure-port=0",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false", f"--service-cluster-ip-range={SERVICE_CIDR}"],
        "kube-scheduler": [str(control_plane.path("kube-scheduler")), f"--kubeconfig={kubeconfig}",
                           "--leader-elect=false", "--secure-port=0"],
        "kwok": [str(kwok.path("kwok")), f"--kubeconfig={kubeconfig}", f"--config={kwok.path(kubebuild.STAGES_FILE)}",
                 "--manage-all-nodes=false",
                 f"--manage-nodes-with-annotation-selector={'='.join(KWOK_ANNOTATION)}",
                 f"--cidr={POD_CIDR}", "--node-ip=127.0.0.1", f"--server-address=127.0.0.1:{ports.kwok}"],
    }


def _members(pgid: int) -> list[int]:
    """The live processes of the cluster's process group that run one of the built binaries (a
    recorded group id alone could by now belong to someone else)."""
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
        if fields[0] != "Z" and int(fields[2]) == pgid and exe.startswith(binaries):
            pids.append(int(proc.name))
    return pids


def _record(state: Path) -> dict | None:
    try:
        return json.loads((state / "cluster.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _info(name: str, record: dict) -> ClusterInfo:
    state = state_dir(name)
    ports = ClusterPorts(**record["ports"])
    return ClusterInfo(name=name, server=f"https://127.0.0.1:{ports.apiserver}", kubeconfig=state / "kubeconfig",
                       state_dir=state, nodes=tuple(record["nodes"]), ports=ports, pgid=record["pgid"])


def cluster_status(name: str) -> ClusterInfo | None:
    """The cluster, if every one of its processes runs and its API server is ready."""
    record = _record(state_dir(name))
    if not record or len(_members(record["pgid"])) != len(COMPONENTS):
        return None
    info = _info(name, record)
    return info if info.client().ready() else None


def stop_cluster(name: str) -> None:
    """Stops every process of the cluster (TERM, then KILL); its state stays for the next start."""
    state = state_dir(name)
    record = _record(state)
    if not record:
        return
    pgid = record["pgid"]
    deadline = time.monotonic() + STOP_TIMEOUT
    sig = signal.SIGTERM
    while pids := _members(pgid):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if time.monotonic() >= deadline:
            sig = signal.SIGKILL
        time.sleep(0.2)
    (state / "cluster.json").unlink(missing_ok=True)
    log(f"cluster {name} stopped")


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait(what: str, check, procs: dict[str, subprocess.Popen], logs: Path, deadline: float) -> None:
    while not check():
        for component, proc in procs.items():
            if proc.poll() is not None:
                raise HostError(f"{component} exited with {proc.returncode} while waiting for {what}; "
                                f"{logs / (component + '.log')}:\n{_log_tail(logs / (component + '.log'))}")
        if time.monotonic() > deadline:
            raise HostError(f"timed out waiting for {what}; logs in {logs}")
        time.sleep(0.2)


def _fake_node(name: str, nodes: FakeNodes) -> dict:
    capacity = {"cpu": nodes.cpu, "memory": nodes.memory, "pods": str(nodes.pods), GPU_RESOURCE: str(nodes.gpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1]},
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "type": "kwok"}},
        "spec": {"taints": [FAKE_NODE_TAINT]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def start_cluster(name: str, ports: ClusterPorts, nodes: FakeNodes = FakeNodes(), *, fresh: bool = False,
                  timeout: float = START_TIMEOUT) -> ClusterInfo:
    """Starts the cluster (or returns it when it runs already) and waits until its API server is
    ready and every fake node is Ready. `fresh` starts from an empty etcd."""
    state = state_dir(name)
    if not fresh and (running := cluster_status(name)) and running.ports == ports:
        return running
    stop_cluster(name)
    if taken := ports.taken():
        raise HostError(f"cluster {name}: ports already in use on 127.0.0.1: {', '.join(taken)} "
                        f"(another cluster? `python -m localhosts.kubecli status NAME`)")
    started = time.monotonic()
    deadline = started + timeout
    state.mkdir(parents=True, exist_ok=True)
    pki = _pki(state / "pki", name)
    server = f"https://127.0.0.1:{ports.apiserver}"
    _write(state / "kubeconfig", _kubeconfig(pki, server, name))
    if fresh:
        shutil.rmtree(state / "etcd", ignore_errors=True)
    (state / "etcd").mkdir(mode=0o700, exist_ok=True)
    logs = state / "logs"
    logs.mkdir(exist_ok=True)
    commands = _command_lines(state, ports)

    procs: dict[str, subprocess.Popen] = {}
    pgid = 0  # the first process leads the group every other one joins

    def launch(component: str) -> None:
        nonlocal pgid
        with open(logs / f"{component}.log", "wb") as out:
            proc = subprocess.Popen(commands[component], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=state, process_group=pgid)
        procs[component] = proc
        if not pgid:
            pgid = proc.pid
            _write(state / "cluster.json", json.dumps({"ports": dataclasses.asdict(ports), "pgid": pgid,
                                                       "nodes": nodes.names()}) + "\n")

    try:
        log(f"starting cluster {name} at {server}")
        launch("etcd")
        launch("kube-apiserver")
        client = KubeClient(server, pki)
        _wait("the API server", client.ready, procs, logs, deadline)
        for component in ("kube-controller-manager", "kube-scheduler", "kwok"):
            launch(component)
        for node in nodes.names():
            client.create("/api/v1/nodes", _fake_node(node, nodes))
        for node in nodes.names():
            _wait(f"node {node} Ready", lambda n=node: node_ready(client.get(f"/api/v1/nodes/{n}")),
                  procs, logs, deadline)
        # Pods are admitted only once their namespace's default service account exists.
        _wait("the default service account",
              lambda: client.get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
              procs, logs, deadline)
    except BaseException:
        stop_cluster(name)
        raise
    log(f"cluster {name} ready in {time.monotonic() - started:.1f} s (kubeconfig {state / 'kubeconfig'})")
    return _info(name, _record(state))
