"""The embedded default: two local systemd hosts and the local Kubernetes cluster, and the files
the `local` stack installs on them.

The hosts are nspawn containers (localhosts/hosts/host.py): `local`, the inference host, and `gateway`.
The inference host's llama.cpp build folder and ccache live in the cache on this machine (bind
mounts), so a re-created host, or a test host, reuses a finished build of the same key instead of
spending 20 minutes on it again; the gateway host gets the wheelhouse LiteLLM installs from. The
cluster `local` (localhosts/kube/kubecluster.py: a real node) is where the stack's vLLM fleet runs, from
the serving image built here (localhosts/images/serving_image: the vLLM stand-in); its binaries and the
kubernetes provider plugin are built from Go modules once (localhosts/kube/kubebuild.py).

    python -m localhosts.local_stack up [--fresh]   # boot the hosts and the cluster, make their files
    python -m localhosts.local_stack down
    pulumi stack output --json | python -m localhosts.local_stack report   # what up-local prints
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from components.cache import cache_dir
from localhosts.hosts import llama_source
from localhosts.images import node_guard_image, prometheus_image, seat_image
from localhosts.kube import kubebuild
from localhosts.standins import tiny_model
from localhosts.hosts.host import HostInfo, start_host, stop_host
from localhosts.kube.kubecluster import LOCAL_CLUSTER, ClusterInfo, start_cluster, stop_cluster
from localhosts.hosts.wheelhouse import ensure_wheelhouse
from spear.harness import DEFAULT_VERSIONS

LOCAL_HOST = "local"
LOCAL_SSH_PORT = 2222  # matches stacks/Pulumi.local.yaml
RUNTIME_DIR = "/opt/spear"
GATEWAY_HOST = "gateway"
GATEWAY_SSH_PORT = 2223  # matches stacks/Pulumi.local.yaml
WHEELHOUSE = "/var/cache/spear/wheelhouse"  # gateway.litellm.wheelhouse in the local stack
BACKUPS = "/var/backups/spear-gateway"  # gateway.database.backup.folder in the local stack
LOCAL_STACK = Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.local.yaml"


def host_binds() -> list[tuple[str, str]]:
    cache = cache_dir()
    binds = [(cache / "llama-builds", f"{RUNTIME_DIR}/builds"), (cache / "ccache", "/root/.cache/ccache")]
    for src, _ in binds:
        src.mkdir(parents=True, exist_ok=True)
    return [(str(src), dst) for src, dst in binds]


def ensure_files() -> tuple[llama_source.SourceArchive, Path]:
    """The llama.cpp source archive and the smoke-test model the local stack names."""
    return llama_source.ensure_source_archive(), tiny_model.ensure_model(tiny_model.SMOKE_ANSWER)


def start(name: str = LOCAL_HOST, ssh_port: int = LOCAL_SSH_PORT, fresh: bool = False) -> HostInfo:
    """Boot host `name` with the local stack's binds, once the files its stack names exist."""
    ensure_files()
    return start_host(name, ssh_port, host_binds(), fresh=fresh)


def stop(name: str = LOCAL_HOST, discard: bool = False) -> None:
    """Power host `name` off (the counterpart of start); discard=True deletes its disk too."""
    stop_host(name, discard=discard)


def litellm_version(stack_file: Path = LOCAL_STACK) -> str:
    """The LiteLLM version a stack file pins for its gateway."""
    config = yaml.safe_load(stack_file.read_text())["config"]
    return str(config["spear-fleet:gateway"]["litellm"]["version"])


def _backups(gateway: str) -> Path:
    return cache_dir() / "hosts" / f"{gateway}-backups"


def start_gateway(name: str = GATEWAY_HOST, ssh_port: int = GATEWAY_SSH_PORT,
                  versions: tuple[str, ...] = (), fresh: bool = False,
                  backups: Path | None = None) -> HostInfo:
    """Boot the gateway host `name` with the wheelhouse for the stack's LiteLLM version (and any
    other `versions` a test moves to) mounted where the stack's install looks, and `backups` (a
    folder of this machine, by default beside the host's own) where its database backups go:
    a fresh start empties the host's disk, not its backups."""
    for version in (litellm_version(), *versions):
        folder = ensure_wheelhouse(version)
    backups = backups or _backups(name)
    backups.mkdir(parents=True, exist_ok=True)
    return start_host(name, ssh_port, [(str(folder), WHEELHOUSE), (str(backups), BACKUPS)],
                      fresh=fresh)


def harness_versions(stack_file: Path = LOCAL_STACK) -> dict[str, str]:
    """The harness versions a stack file pins (`harnesses`), which its seat image holds."""
    config = yaml.safe_load(stack_file.read_text())["config"]
    return {**DEFAULT_VERSIONS, **config.get("spear-fleet:harnesses", {})}


def start_local_cluster(fresh: bool = False) -> ClusterInfo:
    """The cluster the stack's vLLM fleet names (its kubeconfig is written by the start), once its
    binaries, the kubernetes provider plugin and the images are built (cached: instant when they
    are), with the serving image, the bundled Prometheus's, the seat image and the node guard's
    loaded into its node; the seat and guard images' pinned references go where the stack's
    seatImage.file and nodeGuard.image.file read them."""
    from localhosts.images.serving_image.build import ensure_image  # builds llama-server: only here
    kubebuild.ensure_all()
    seats = seat_image.ensure_image(harness_versions())
    guard = node_guard_image.ensure_image()
    cluster = start_cluster(LOCAL_CLUSTER, images=[ensure_image().archive,
                                                   prometheus_image.ensure_image().archive,
                                                   seats.archive, guard.archive], fresh=fresh)
    seats.write_ref(seat_image.REF_NAME)
    guard.write_ref(node_guard_image.REF_NAME)
    return cluster


def report(outputs: dict) -> list[str]:
    """The lines up-local ends with, from the stack's outputs: each inference host's smoke test,
    each developer's through the gateway, the hatch's cap and the limit only the operator can set,
    the gateway database's backups, the vLLM fleet's rollout, and where its bundled Prometheus
    answers."""
    lines = [f"smoke test ({name}): {host['smoke_test']}"
             for name, host in outputs["inference_hosts"].items()]
    gateway = outputs.get("gateway") or {}
    lines += [f"smoke test (gateway, coder, {developer}): {summary}; served by "
              + ", ".join(gateway.get("served_by", {}).get(developer) or ["?"])
              for developer, summary in gateway.get("smoke_tests", {}).items()]
    if hatch := gateway.get("hatch"):
        lines.append(f"hatch: refused over {hatch['monthly_cap_usd']:g} USD a month, alert at"
                     f" {hatch['alert_usd']:g} USD; {hatch['provider_limit']}")
    if backup := gateway.get("database_backup"):
        lines.append(f"gateway database backups: {backup['dumps']} in {backup['folder']}"
                     f" ({_backups(GATEWAY_HOST)} on this machine), the first {backup['first_dump']}")
    fleet = outputs.get("vllm_fleet")
    if fleet:
        stable = fleet["stable"]
        ready = fleet.get("stable_ready_replicas") or 0
        line = (f"vLLM fleet (local cluster, namespace {fleet['namespace']}): stable {stable['image']}"
                f" revision {stable['revision'][:7]}, {ready}/{stable['replicas']} ready")
        if fleet.get("canary"):
            canary = fleet["canary"]
            line += (f"; canary {canary['image']} revision {canary['revision'][:7]},"
                     f" {canary.get('ready_replicas') or 0}/{canary['replicas']} ready (pilot ring only)")
        lines.append(line)
        prometheus = fleet.get("prometheus") or {}
        if prometheus.get("port"):  # bundled: on the node's network, which is this machine's
            lines.append(f"Prometheus (the fleet's and the gateway's metrics, the alert rules):"
                         f" http://127.0.0.1:{prometheus['port']}/api/v1/alerts")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localhosts.local_stack")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="boot the local hosts and the local cluster, and make the files"
                                   " their stack names")
    up.add_argument("--fresh", action="store_true",
                    help="start from clean root filesystems and an empty etcd")
    sub.add_parser("down", help="stop the local hosts and the local cluster")
    sub.add_parser("report", help="print the smoke tests and the fleet's rollout from the stack's"
                                  " outputs (`pulumi stack output --json` on stdin)")
    args = parser.parse_args(argv)
    if args.command == "up":
        for info in (start(fresh=args.fresh), start_gateway(fresh=args.fresh)):
            print(f"{info.name} host up: ssh -i {info.private_key_path} -p {info.ssh_port}"
                  " root@127.0.0.1", file=sys.stderr)
        cluster = start_local_cluster(fresh=args.fresh)
        print(f"{cluster.name} cluster up: {cluster.server} (kubeconfig {cluster.kubeconfig})", file=sys.stderr)
    elif args.command == "down":
        stop()
        stop(GATEWAY_HOST)
        stop_cluster(LOCAL_CLUSTER)
    else:
        print("\n".join(report(json.load(sys.stdin))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
