"""The local cluster's one real node: containerd (with runc and the CNI plugins), the kubelet and
kube-proxy, on this machine itself (no container around them), as measured in
shared/notes/kubelet-containers-probe.md.

A node changes the machine it runs on, so the node records what it will change before it
starts and `cleanup` puts every bit of it back: the sysctls the kubelet and the bridge plugin set,
the iptables chains (kubelet, CNI) and nft tables (kube-proxy) they add, the node's own link,
the pods' bridge and network namespaces, the mounts under its folders, and the pods' cgroups.
One node per machine: kube-proxy's nft tables and the kubelet's settings are machine-wide.

Pods run real processes at pod IPs on a bridge of this machine (POD_SUBNET); Services work through
kube-proxy (nftables mode), also from this machine, which is how the gateway host (an nspawn
container sharing this machine's network) reaches the fleet.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tarfile
from pathlib import Path

from localhosts.kube import kubebuild
from spear.seats import NODE_GUARD_TABLE
from localhosts.servers.processes import terminate
from localhosts.report import HostError

NODE = "spear-node"
# TEST-NET-1 (RFC 5737) on a link of the node's own (a port-less bridge: this kernel has no dummy
# links): the kubelet refuses a loopback node IP, and no address of this machine's network is used.
NODE_IP = "192.0.2.2"
NODE_LINK = "spear-node0"
BRIDGE = "spear-cni0"
POD_CIDR = "10.244.0.0/16"
POD_SUBNET = "10.244.0.0/24"
CONTAINERD_RUN = Path("/run/spear-containerd")
SOCKET = CONTAINERD_RUN / "containerd.sock"
K8S_NAMESPACE = "k8s.io"  # the containerd namespace the kubelet's images must be in
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.2"  # containerd 2.4's default sandbox image, built here
KUBELET_PORT, KUBELET_HEALTHZ = 10350, 10348
PROXY_METRICS, PROXY_HEALTHZ = 10349, 10356
# What the kubelet, kube-proxy and the bridge plugin may set (measured: the first four change).
SYSCTLS = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "net.ipv4.ip_forward",
           "net.ipv4.conf.all.route_localnet", "net.ipv6.conf.all.forwarding",
           "net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_tcp_timeout_established",
           "net.netfilter.nf_conntrack_tcp_timeout_close_wait", "net.bridge.bridge-nf-call-iptables")
IPTABLES = ("iptables", "ip6tables")
TABLES = ("filter", "nat", "mangle", "raw")
OURS = re.compile(r"^(KUBE|CNI)-")
# kube-proxy's tables, iptables-nft's (the kubelet's and CNI's chains live there) and the
# NetworkPolicy enforcer's: a table the machine did not have before the node is removed whole.
NETPOL_TABLE = ("inet", "kube-network-policies")  # localhosts/kube/network_policies.py
# The node guard's (components/agent_seats/node_guard.py): a stack's seats put it on the node.
GUARD_TABLE = ("inet", NODE_GUARD_TABLE)
NFT_TABLES = (*((family, table) for family in ("ip", "ip6") for table in ("kube-proxy", *TABLES)),
              NETPOL_TABLE, GUARD_TABLE)
# containerd's NRI socket, which the enforcer reads pods' addresses from as they start; under
# containerd's run folder rather than its default /var/run/nri, so the node's cleanup removes it.
NRI_DIR = CONTAINERD_RUN / "nri"
COMPONENTS = ("containerd", "kubelet", "kube-proxy")
# gVisor's runtime handler in containerd, and the RuntimeClass the cluster makes for it.
GVISOR_HANDLER = "runsc"
GVISOR_RUNTIME_CLASS = "gvisor"
KUBELET_USER, KUBE_PROXY_USER = "kubelet", "kube-proxy"  # their kubeconfigs (localhosts/kube/kubepki.py)


def _run(args: list[str], check: bool = True) -> str:
    done = subprocess.run(args, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise HostError(f"{' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _chains() -> dict[str, list[str]]:
    """'<tool> <table> <chain>' of every chain there is, per tool (tables that exist)."""
    found: dict[str, list[str]] = {}
    for tool in IPTABLES:
        for table in TABLES:
            out = subprocess.run([tool, "-w", "-t", table, "-S"], capture_output=True, text=True).stdout
            found.setdefault(tool, []).extend(f"{table} {line.split()[1]}" for line in out.splitlines()
                                              if line.startswith(("-N ", "-P ")))
    return found


def _nft_tables() -> list[str]:
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return [line.removeprefix("table ").strip() for line in out.splitlines()]


def host_snapshot() -> dict:
    """What the node may change, as it is before the node starts."""
    return {"sysctls": {n: _sysctl_path(n).read_text().strip() for n in SYSCTLS if _sysctl_path(n).exists()},
            "chains": _chains(), "nft": _nft_tables()}


def snapshot_file(state: Path) -> Path:
    return state / "host-before-node.json"


def record_host(state: Path) -> None:
    """Record the machine's settings once: a start after a crash keeps the first record, which still
    holds the values from before any node ran."""
    path = snapshot_file(state)
    if not path.exists():
        path.write_text(json.dumps(host_snapshot(), indent=2) + "\n")


def _paths(state: Path) -> dict[str, Path]:
    return {"containerd": state / "containerd", "kubelet": state / "kubelet", "cni": state / "cni",
            "pod-logs": state / "pod-logs"}


def write_configs(state: Path, pki: Path, kubeconfigs: dict[str, Path]) -> dict[str, list[str]]:
    """The node's config files, and each component's command line."""
    node = kubebuild.node()
    kube = kubebuild.kubernetes()
    paths = _paths(state)
    for path in paths.values():
        path.mkdir(parents=True, exist_ok=True)
    CONTAINERD_RUN.mkdir(parents=True, exist_ok=True)
    (paths["cni"] / "net.d").mkdir(exist_ok=True)
    containerd = paths["containerd"] / "config.toml"
    gvisor = kubebuild.gvisor()
    runsc_config = paths["containerd"] / "runsc.toml"
    # Its state under the node's run folder, which the node's cleanup removes.
    runsc_config.write_text(f'binary_name = "{gvisor.path("runsc")}"\n'
                            f'root = "{CONTAINERD_RUN / "runsc"}"\n'
                            f'log_path = "{paths["pod-logs"]}/runsc-%ID%.shim.log"\n')
    containerd.write_text(f"""version = 3
root = "{paths['containerd'] / 'root'}"
state = "{CONTAINERD_RUN / 'state'}"

[grpc]
  address = "{SOCKET}"

[plugins.'io.containerd.nri.v1.nri']
  socket_path = "{NRI_DIR / 'nri.sock'}"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{PAUSE_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  # There is no CAP_SYS_RESOURCE here, even as root: runc could not lower oom_score_adj.
  restrict_oom_score_adj = true
  disable_apparmor = true

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{node.path('runc')}"
  SystemdCgroup = false

# gVisor (localhosts/kube/kubebuild.py `gvisor`): the RuntimeClass `gvisor` names this handler.
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{GVISOR_HANDLER}]
  runtime_type = "io.containerd.runsc.v1"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{GVISOR_HANDLER}.options]
  TypeUrl = "io.containerd.runsc.v1.options"
  ConfigPath = "{runsc_config}"

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["{node.folder}"]
  conf_dir = "{paths['cni'] / 'net.d'}"
""")
    (paths["cni"] / "net.d" / "10-spear.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": "spear-pods",
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]],
                      "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(paths["cni"] / "ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ]}, indent=2) + "\n")
    kubelet = paths["kubelet"] / "config.json"
    kubelet.write_text(json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        # This machine has cgroup v1 (hybrid): the kubelet only warns with this (KEP-5573).
        "failCgroupV1": False, "cgroupDriver": "cgroupfs", "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{SOCKET}",
        "address": NODE_IP, "port": KUBELET_PORT, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": KUBELET_HEALTHZ,
        "tlsCertFile": str(pki / "kubelet-serving.crt"), "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(pki / "ca.crt")}},
        "authorization": {"mode": "AlwaysAllow"},
        "podLogsDir": str(paths["pod-logs"]),
        # A shared machine's disk is not the node's to manage: no evictions, no image GC (the
        # images are built here and cannot be pulled back).
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "maxPods": 110,
    }, indent=2) + "\n")
    proxy = state / "kube-proxy.json"
    proxy.write_text(json.dumps({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "nftables", "clusterCIDR": POD_CIDR, "hostnameOverride": NODE,
        "clientConnection": {"kubeconfig": str(kubeconfigs[KUBE_PROXY_USER])},
        # No CAP_SYS_RESOURCE (see containerd's config); conntrack sysctls stay as they are.
        "oomScoreAdj": 0,
        "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "metricsBindAddress": f"127.0.0.1:{PROXY_METRICS}", "healthzBindAddress": f"127.0.0.1:{PROXY_HEALTHZ}",
    }, indent=2) + "\n")
    return {
        "containerd": [str(node.path("containerd")), f"--config={containerd}", "--log-level=warn"],
        "kubelet": [str(kube.path("kubelet")), f"--config={kubelet}", f"--kubeconfig={kubeconfigs[KUBELET_USER]}",
                    f"--root-dir={paths['kubelet']}", f"--cert-dir={pki}", f"--hostname-override={NODE}",
                    f"--node-ip={NODE_IP}", "--v=1"],
        "kube-proxy": [str(kube.path("kube-proxy")), f"--config={proxy}"],
    }


def environment() -> dict[str, str]:
    """containerd finds its shims on PATH; the kubelet and kube-proxy need iptables and nft."""
    return dict(os.environ, PATH=f"{kubebuild.node().folder}:{kubebuild.gvisor().folder}:"
                                 f"{os.environ.get('PATH', '/usr/sbin:/usr/bin')}")


def add_node_link() -> None:
    if not Path(f"/sys/class/net/{NODE_LINK}").exists():
        _run(["ip", "link", "add", NODE_LINK, "type", "bridge"])
    _run(["ip", "addr", "replace", f"{NODE_IP}/32", "dev", NODE_LINK])
    _run(["ip", "link", "set", NODE_LINK, "up"])


def archive_images(archive: Path) -> dict[str, str]:
    """{image name: manifest digest} of what an OCI archive's index.json names (containerd's
    name annotation); {} when it names none."""
    with tarfile.open(archive) as tar:
        # The index comes before the blobs in our archives: the scan stops long before the layers.
        for member in tar:
            if member.name.removeprefix("./") == "index.json":
                index = json.load(tar.extractfile(member))
                return {m["annotations"]["io.containerd.image.name"]: m["digest"]
                        for m in index.get("manifests", [])
                        if "io.containerd.image.name" in (m.get("annotations") or {})}
    return {}


def import_images(archives: list[Path]) -> None:
    """Load OCI archives into containerd's `k8s.io` namespace, where the kubelet looks; one whose
    every image is there already at the same digest is skipped (an import of the seat image
    alone reads and hashes its 0.9 GB again: 16 s on 2 cores)."""
    ctr = [str(kubebuild.node().path("ctr")), "--address", str(SOCKET), "-n", K8S_NAMESPACE]
    listed = [line.split() for line in _run([*ctr, "images", "ls"]).splitlines()[1:]]
    present = {fields[0]: fields[2] for fields in listed if len(fields) > 2}
    for archive in archives:
        names = archive_images(archive)
        if not names or any(present.get(name) != digest for name, digest in names.items()):
            _run([*ctr, "images", "import", str(archive)])


# --- cleanup ------------------------------------------------------------------------------------

def _cgroup_dirs() -> list[Path]:
    """The pods' cgroups, deepest first, in every hierarchy (v1 controllers and the unified one)."""
    root = Path("/sys/fs/cgroup")
    dirs = []
    for hierarchy in [root, *(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())]:
        top = hierarchy / "kubepods"
        if top.is_dir():
            dirs += sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
            dirs.append(top)
    return dirs


def _pod_pids() -> set[int]:
    pids: set[int] = set()
    for folder in _cgroup_dirs():
        try:
            pids |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
        except OSError:
            pass
    return pids


def _shim_pids() -> set[int]:
    """The shims' processes, and gVisor's sandboxes (runsc), of any build of them."""
    builds = kubebuild.node().folder.parent
    prefixes = (f"{builds}{os.sep}node-", f"{builds}{os.sep}gvisor-")
    pids = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "exe").startswith(prefixes):
                pids.add(int(proc.name))
        except OSError:
            pass
    return pids


def kill_containers(timeout: float = 10.0) -> None:
    """Every pod's processes and every shim (they outlive containerd on purpose: not here)."""
    terminate(lambda: _pod_pids() | _shim_pids(), timeout)


def _mount_points() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        points.append(point)
    return points


def _unmount_under(prefixes: list[str]) -> None:
    for _ in range(5):  # stacked mounts come off one layer at a time
        points = [p for p in _mount_points() if any(p == x or p.startswith(x.rstrip("/") + "/") for x in prefixes)]
        if not points:
            return
        for point in sorted(set(points), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)
    raise HostError(f"could not unmount: {', '.join(points)}")


def _restore_sysctls(before: dict[str, str]) -> None:
    for name, value in before.items():
        path = _sysctl_path(name)
        if path.exists() and path.read_text().strip() != value:
            path.write_text(value + "\n")


def _remove_chains(before: dict[str, list[str]]) -> None:
    for tool in IPTABLES:
        had = set(before.get(tool, []))
        for table in TABLES:
            rules = subprocess.run([tool, "-w", "-t", table, "-S"], capture_output=True, text=True).stdout
            new = {line.split()[1] for line in rules.splitlines()
                   if line.startswith("-N ") and OURS.match(line.split()[1]) and f"{table} {line.split()[1]}" not in had}
            if not new:
                continue
            # Jumps into the new chains from chains that stay, then the new chains themselves.
            for line in rules.splitlines():
                words = shlex.split(line)
                if words[0] == "-A" and words[1] not in new and any(w in new for w in words[2:]):
                    subprocess.run([tool, "-w", "-t", table, "-D", *words[1:]], capture_output=True)
            for chain in new:
                subprocess.run([tool, "-w", "-t", table, "-F", chain], capture_output=True)
            for chain in new:
                subprocess.run([tool, "-w", "-t", table, "-X", chain], capture_output=True)


def _remove_nft(before: list[str]) -> None:
    for family, table in NFT_TABLES:
        if f"{family} {table}" in _nft_tables() and f"{family} {table}" not in before:
            _run(["nft", "delete", "table", family, table])


def _remove_links() -> None:
    for link in Path("/sys/class/net").iterdir():
        master = link / "master"
        if link.name in (BRIDGE, NODE_LINK) or (master.exists() and os.path.basename(os.readlink(master)) == BRIDGE):
            subprocess.run(["ip", "link", "del", link.name], capture_output=True)


def cleanup(state: Path) -> None:
    """Everything the node left on this machine, removed, and its settings as they were. The node's
    processes (containerd, kubelet, kube-proxy) must be stopped first."""
    kill_containers()
    netns = [str(p) for p in Path("/run/netns").glob("cni-*")] if Path("/run/netns").is_dir() else []
    _unmount_under([str(p) for p in _paths(state).values()] + [str(CONTAINERD_RUN), *netns])
    for path in netns:
        Path(path).unlink(missing_ok=True)
    for folder in _cgroup_dirs():
        try:
            folder.rmdir()
        except OSError:
            pass
    _remove_links()
    path = snapshot_file(state)
    if path.exists():
        before = json.loads(path.read_text())
        _remove_nft(before["nft"])
        _remove_chains(before["chains"])
        _restore_sysctls(before["sysctls"])
        path.unlink()
    subprocess.run(["rm", "-rf", str(CONTAINERD_RUN), str(_paths(state)["cni"] / "ipam")])


def leftovers(state: Path, before: dict) -> list[str]:
    """What differs from `before` (a host_snapshot) or is left of a node: empty once cleaned up."""
    now = host_snapshot()
    found = [f"sysctl {n}={now['sysctls'].get(n)} (was {v})" for n, v in before["sysctls"].items()
             if now["sysctls"].get(n) != v]
    for tool in IPTABLES:
        found += [f"{tool} chain {c}" for c in sorted(set(now["chains"].get(tool, [])) - set(before["chains"].get(tool, [])))]
    found += [f"nft table {t}" for t in sorted(set(now["nft"]) - set(before["nft"]))]
    found += [f"link {name}" for name in (BRIDGE, NODE_LINK) if Path(f"/sys/class/net/{name}").exists()]
    prefixes = [str(p) for p in _paths(state).values()] + [str(CONTAINERD_RUN), "/run/netns/cni-"]
    found += [f"mount {p}" for p in _mount_points() if any(p.startswith(x) for x in prefixes)]
    found += [f"cgroup {d}" for d in _cgroup_dirs()]
    found += [f"process {pid}" for pid in sorted(_pod_pids() | _shim_pids())]
    return found
