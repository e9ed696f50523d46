"""How `pulumi preview` scales with the number of developers' keys (the targets below).

    scripts/bench-preview [--with-hosts] [--runs 3]

A reference fleet stack (three inference hosts, the gateway, N developers) is previewed next to
the engine's floor in the same run: a program registering as many resources as the reference's
preview has steps, each as cheap as a resource can be. Two floors are measured:
  - dynamic: one dynamic resource per step whose provider does nothing. The reference's
    resources are dynamic resources, and every dynamic resource pays the same engine path
    (its provider serialized with dill, `check` in the dynamic provider's process): this is the
    fair floor, and the one the ratio uses;
  - component: one ComponentResource per step, no provider at all: the engine's absolute floor,
    printed for scale.
Each preview is timed wall clock, best of `--runs` after one warm-up (which writes the project's
bytecode, as a user's first preview does), under two engine settings:
the default, and PULUMI_SKIP_CHECKPOINTS=true. The file backend keeps a snapshot manager even for
a preview and serializes the whole deployment (every resource, secrets encrypted) after each step
before discarding it: quadratic in the stack's size, and most of a large preview's time. Skipping
checkpoints costs a preview nothing (it persists nothing); for `up` it would trade the state's
record of a half-finished update for speed, so it is a preview setting only. It prints numbers;
it is not a test (the machine's other load moves them: the load average is printed too).

`--with-hosts` also boots two local hosts (an inference host serving the tiny model and a gateway
host; ports below) and measures a no-op `pulumi up` with 200 keys: the first `up` (creates the
keys), a second `up` (must change nothing), `up --refresh` (reads each key once), counting the
key API calls from the proxy's access log on the gateway host. The hosts are stopped at the end.

It lives here, beside the local hosts it boots, and runs on this machine only: every stack is a
throwaway copy of the project (localhosts/engine.Project) with its own file backend and
passphrase in a temporary folder, never the user's state.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.hostops.ssh import Session
from localhosts import local_stack
from spear.rules import GATEWAY_UNIT
from localhosts.engine import REPO, Project, engine_env

SIZES = (200, 400)
HOSTS = 3
# Targets: 200 keys within 1.3x of the floor, 400 keys within 2.1x of 200.
FLOOR_TARGET, GROWTH_TARGET = 1.3, 2.1
# Engine settings each preview is timed under (see above).
SETTINGS = {"default": {}, "skip-checkpoints": {"PULUMI_SKIP_CHECKPOINTS": "true"}}
MASTER_KEY = "sk-spear-bench-master-1f4e"
FRONTIER_KEY = "sk-ant-bench-frontier-77c2"
BACKUP_KEY = "spear-bench-backup-key-0123456789abcdef"  # 32 characters or more

# The reference's three inference hosts: preview never connects, so they need not exist.
REF_SSH_PORTS = (2294, 2295, 2296)
REF_SERVER_PORTS = (8174, 8175, 8176)
REF_CLIENT_PORTS = (8177, 8178, 8179)  # each upstream's tunnel end on the gateway host

# --with-hosts: two real local hosts (the lead's reserved ports).
GW_HOST, GW_SSH, GW_PROXY, GW_DATABASE = "bench-gw", 2292, 4042, 25432
LLAMA_HOST, LLAMA_SSH, LLAMA_SERVER, LLAMA_CLIENT = "bench-llama", 2293, 8172, 8173
NOOP_KEYS = 200

# The no-op provider lives in a module beside the program, as the project's providers do: dill
# then pickles it by reference, the same per-resource cost as theirs (a class defined in
# __main__ is pickled by value, and many of those at once overflow the pickler's recursion).
_NOTHING_PROVIDER = '''"""A dynamic provider that does nothing, for the engine's floor."""
from pulumi.dynamic import CreateResult, ResourceProvider


class Nothing(ResourceProvider):
    def create(self, props):
        return CreateResult(id_="nothing", outs={})
'''

_FLOOR_DYNAMIC = '''"""The engine's floor for dynamic-resource stacks: {count} resources whose provider does
nothing."""
from pulumi.dynamic import Resource

from bench_floor import Nothing


class Floor(Resource, module="bench", name="Floor"):
    def __init__(self, name):
        super().__init__(Nothing(), name, {{}}, None)


for i in range({count}):
    Floor(f"floor-{{i}}")
'''

_FLOOR_COMPONENT = '''"""The engine's absolute floor: {count} component resources, no provider."""
import pulumi


class Floor(pulumi.ComponentResource):
    def __init__(self, name):
        super().__init__("bench:index:Floor", name, None, None)
        self.register_outputs({{}})


for i in range({count}):
    Floor(f"floor-{{i}}")
'''


def local_config() -> dict[str, Any]:
    """The local stack's config without its encrypted secrets, keys without the project prefix."""
    doc = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    return {key.split(":", 1)[1]: value for key, value in doc.items()
            if not (isinstance(value, dict) and set(value) == {"secure"})}


def developers(count: int) -> dict[str, Any]:
    """dev-001... with distinct budgets, in two teams."""
    return {f"dev-{i:03d}": {"team": ("platform", "research")[i % 2],
                             "maxBudget": 10 + i * 0.25, "budgetDuration": "30d"}
            for i in range(1, count + 1)}


def reference_config(count: int, keys: list[Path]) -> dict[str, Any]:
    """Three copies of the local stack's inference host (own SSH port, server port and backend),
    the local stack's gateway routing `coder` to all three, `count` developers. `keys`: an SSH
    key file per inference host, then the gateway's."""
    local = local_config()
    hosts, backends = {}, {}
    for i, key in enumerate(keys[:HOSTS]):
        host = copy.deepcopy(local["inferenceHosts"]["local"])
        host["ssh"].update(port=REF_SSH_PORTS[i], privateKeyPath=str(key))
        host["server"]["port"] = REF_SERVER_PORTS[i]
        host["backend"] = f"bench-{i + 1}"
        backends[f"bench-{i + 1}"] = {"kind": "port", "port": REF_CLIENT_PORTS[i]}
        hosts[f"llama-{i + 1}"] = host
    gateway = copy.deepcopy(local["gateway"])
    gateway["ssh"]["privateKeyPath"] = str(keys[-1])
    gateway["coder"]["upstreams"] = list(hosts)
    # No seats here, so no HTTPS listener (and no certificate to hand the preview).
    gateway["listen"].pop("tls", None)
    return {"backends": backends, "inferenceHosts": hosts, "gateway": gateway,
            "developers": developers(count)}


def add_secrets(project: Project, stack: str) -> None:
    for key, value in (("gatewayMasterKey", MASTER_KEY), ("frontierApiKey", FRONTIER_KEY),
                       ("gatewayBackupKey", BACKUP_KEY)):
        project.pulumi("config", "set", "--secret", "--stack", stack, f"spear-fleet:{key}", value)


def preview_steps(project: Project, stack: str) -> list[dict[str, Any]]:
    return project.preview(stack)["steps"]


def registered(steps: list[dict[str, Any]]) -> int:
    """The resources a program registered: the steps but the stack and the providers (a floor
    program gets those from the engine as the reference does)."""
    return sum(1 for step in steps if not re.search(r"::pulumi:(pulumi:Stack|providers:)",
                                                    step["urn"]))


def best_preview(project: Project, stack: str, runs: int, setting: dict[str, str]) -> float:
    """Seconds of `pulumi preview` under an engine setting, best of `runs` after one warm-up."""
    times = []
    base = project.env
    project.env = {**base, **setting}
    try:
        for _ in range(runs + 1):
            start = time.perf_counter()
            project.pulumi("preview", "--stack", stack, "--json")
            times.append(time.perf_counter() - start)
    finally:
        project.env = base
    return min(times[1:])


@dataclass
class Row:
    developers: int
    steps: int
    setting: str
    reference: float
    floor_dynamic: float
    floor_component: float

    @property
    def ratio(self) -> float:
        return self.reference / self.floor_dynamic


# Each floor ends as the reference's program does (components/registrations.py), so the floor is
# the engine's and not the SDK's quadratic wait for a program that never yielded.
_LAST = "\nfrom components import registrations\nregistrations.start_before_the_wait()\n"


def floor_project(workdir: Path, env: dict[str, str], program: str, count: int) -> Project:
    project = Project(workdir, env, program=program.format(count=count) + _LAST)
    (project.dir / "bench_floor.py").write_text(_NOTHING_PROVIDER)
    project.pulumi("stack", "init", "floor")
    return project


def bench_previews(workdir: Path, env: dict[str, str], runs: int) -> list[Row]:
    keys = []
    for i in range(HOSTS + 1):
        key = workdir / f"id_ed25519_{i}"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        keys.append(key)
    reference = Project(workdir / "reference", env)
    rows = []
    for count in SIZES:
        stack = f"ref-{count}"
        reference.new_stack(stack, reference_config(count, keys))
        add_secrets(reference, stack)
        steps = preview_steps(reference, stack)
        resources = registered(steps)
        floors = {}
        for kind, program in (("dynamic", _FLOOR_DYNAMIC), ("component", _FLOOR_COMPONENT)):
            floor = floor_project(workdir / f"floor-{kind}-{count}", env, program, resources)
            floor_steps = preview_steps(floor, "floor")
            if registered(floor_steps) != resources:
                raise SystemExit(f"bench-preview: the {kind} floor registered"
                                 f" {registered(floor_steps)} resources, not {resources}")
            floors[kind] = floor
        for setting, variables in SETTINGS.items():
            row = Row(count, len(steps), setting,
                      best_preview(reference, stack, runs, variables),
                      best_preview(floors["dynamic"], "floor", runs, variables),
                      best_preview(floors["component"], "floor", runs, variables))
            print(f"  N={count} {setting}: {len(steps)} steps, reference {row.reference:.2f} s,"
                  f" dynamic floor {row.floor_dynamic:.2f} s,"
                  f" component floor {row.floor_component:.2f} s", file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def print_table(rows: list[Row], runs: int) -> None:
    print(f"pulumi preview, wall clock, best of {runs} after one warm-up"
          f" (floor: dynamic resources with a no-op provider)")
    print(f"{'N':>5} {'steps':>6} {'engine setting':>16} {'reference s':>12} {'floor s':>8}"
          f" {'ratio':>6} {'component floor s':>18}")
    for row in rows:
        print(f"{row.developers:>5} {row.steps:>6} {row.setting:>16} {row.reference:>12.2f}"
              f" {row.floor_dynamic:>8.2f} {row.ratio:>6.2f} {row.floor_component:>18.2f}")
    for setting in SETTINGS:
        by_size = {row.developers: row for row in rows if row.setting == setting}
        first = by_size[SIZES[0]]
        growth = by_size[SIZES[1]].reference / first.reference
        print(f"{setting}: N={SIZES[0]} reference / floor {first.ratio:.2f}"
              f" (target <= {FLOOR_TARGET}: {'met' if first.ratio <= FLOOR_TARGET else 'missed'});"
              f" reference N={SIZES[1]} / N={SIZES[0]} {growth:.2f}"
              f" (target <= {GROWTH_TARGET}: {'met' if growth <= GROWTH_TARGET else 'missed'})")


# --with-hosts -----------------------------------------------------------------------------------

def hosts_config(inference, gateway_host) -> dict[str, Any]:
    """The local stack moved to the bench hosts: one inference host, its gateway, 200 keys."""
    local = local_config()
    host = copy.deepcopy(local["inferenceHosts"]["local"])
    host["ssh"].update(port=LLAMA_SSH, privateKeyPath=str(inference.private_key_path))
    host["server"]["port"] = LLAMA_SERVER
    host["backend"] = "bench"
    gateway = copy.deepcopy(local["gateway"])
    gateway["ssh"].update(port=GW_SSH, privateKeyPath=str(gateway_host.private_key_path))
    gateway["listen"]["port"] = GW_PROXY
    gateway["database"]["port"] = GW_DATABASE
    gateway["coder"]["upstreams"] = ["llama"]
    return {"backends": {"bench": {"kind": "port", "port": LLAMA_CLIENT}},
            "inferenceHosts": {"llama": host}, "gateway": gateway,
            "developers": developers(NOOP_KEYS)}


def key_api_calls(gateway_host, since: str) -> dict[str, int]:
    """The proxy's access log on the gateway host since `since`: calls per key endpoint."""
    with Session(gateway_host.connection()) as ssh:
        log = ssh.run(f"journalctl -u {GATEWAY_UNIT} --since '{since}' -o cat --no-pager").stdout
    calls: dict[str, int] = {}
    for method, path in re.findall(r'"(GET|POST) (/key/\w+)', log):
        calls[f"{method} {path}"] = calls.get(f"{method} {path}", 0) + 1
    return calls


def gateway_clock(gateway_host) -> str:
    """The gateway host's clock, for journalctl --since."""
    with Session(gateway_host.connection()) as ssh:
        return ssh.run("date '+%Y-%m-%d %H:%M:%S'").stdout.strip()


def timed_up(project: Project, stack: str, *extra: str) -> tuple[float, dict[str, int], int]:
    """Seconds, the changes by operation (all but `same`), and the unchanged count."""
    start = time.perf_counter()
    update = project.up(stack, *extra)
    seconds = time.perf_counter() - start
    if not update.ok:
        raise SystemExit(f"bench-preview: pulumi up {' '.join(extra)} failed:\n"
                         f"{update.output[-6000:]}")
    changed = {op: n for op, n in update.changes().items() if op != "same"}
    return seconds, changed, update.changes().get("same", 0)


def bench_noop_up(workdir: Path, env: dict[str, str]) -> None:
    inference = local_stack.start(LLAMA_HOST, LLAMA_SSH, fresh=True)
    try:
        gateway_host = local_stack.start_gateway(GW_HOST, GW_SSH, fresh=True)
        project = Project(workdir / "hosts", env)
        project.new_stack("bench", hosts_config(inference, gateway_host))
        add_secrets(project, "bench")
        first, created, _ = timed_up(project, "bench")
        print(f"first up: {first:.1f} s, {created}", file=sys.stderr, flush=True)
        since = gateway_clock(gateway_host)
        time.sleep(1)  # journalctl's --since has one-second steps
        noop, noop_changes, same = timed_up(project, "bench")
        noop_calls = key_api_calls(gateway_host, since)
        since = gateway_clock(gateway_host)
        time.sleep(1)
        refresh, refresh_changes, _ = timed_up(project, "bench", "--refresh")
        refresh_calls = key_api_calls(gateway_host, since)
    finally:
        local_stack.stop(GW_HOST)
        local_stack.stop(LLAMA_HOST)
    print(f"pulumi up --skip-preview with {NOOP_KEYS} keys (one inference host, the gateway)")
    print(f"first up (creates the keys): {first:.1f} s, {sum(created.values())} created")
    print(f"no-op up: {noop:.1f} s, {same} unchanged, {sum(noop_changes.values())} changed"
          f" {noop_changes}, key API calls {noop_calls}")
    print(f"up --refresh: {refresh:.1f} s, {sum(refresh_changes.values())} changed"
          f" {refresh_changes}, key API calls {refresh_calls}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-preview", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed previews each (best of)")
    parser.add_argument("--with-hosts", action="store_true",
                        help="also boot two local hosts and time a no-op up with 200 keys")
    args = parser.parse_args(argv)
    # A user's `pulumi preview` writes the project's bytecode on its first run and loads it after;
    # a shell with PYTHONDONTWRITEBYTECODE (this machine's sets it) compiles every module of the
    # project, in the program and again in the dynamic providers' process, on every preview,
    # which the one-module floors barely pay. The warm-up preview writes it here.
    env = {k: v for k, v in engine_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    print(f"load average at start: {load_average()} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory(prefix="spear-bench-") as tmp:
        rows = bench_previews(Path(tmp), env, args.runs)
        print_table(rows, args.runs)
        if args.with_hosts:
            bench_noop_up(Path(tmp), env)
    print(f"load average at end: {load_average()}")
    return 0


def load_average() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
