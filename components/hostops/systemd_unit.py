"""A system unit on a host: installed, enabled, (re)started, then proven healthy and placed.

Installing or changing it, or changing any of its restart triggers (the config it reads, the
launcher, the build, the model), runs `daemon-reload` and a restart. Then the update waits for
the service's health endpoint and checks the cgroup of its MainPID: the security model needs
the server in system.slice, disjoint from the user.slice scopes tool sandboxes run in.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import RemoteError, Session, tail
from spear import tokens
from spear.rules import SYSTEM_UNIT_DIR, cgroup_line

def listener_pids(host: Session, port: int) -> set[str]:
    """PIDs of the processes listening on a TCP port on the host (`ss` from iproute2)."""
    out = host.run(f"ss -Hltnp 'sport = :{int(port)}'").stdout
    return set(re.findall(r"pid=(\d+)", out))


def placement_ok(cgroup_text: str, slice_name: str, unit: str) -> bool:
    """True when /proc/<pid>/cgroup puts the process in <slice>/<unit> on the unified tree.

    On a hybrid host the file has v1 controller lines too; only the `0::` line counts.
    """
    return cgroup_line(slice_name, unit) in cgroup_text.splitlines()


@dataclass
class HealthCheck:
    port: int
    address: str = "127.0.0.1"
    path: str = "/health"
    # Loading 79 GiB of weights takes minutes; a tiny model, a second.
    timeout_seconds: int = 900


@dataclass
class SystemdUnitArgs:
    connection: pulumi.Input[dict]
    unit: str  # e.g. "spear-inference.service"
    content: pulumi.Input[str]
    slice: str
    health: HealthCheck
    # Anything whose change must restart the service, by name (digests, build keys).
    restart_triggers: dict[str, pulumi.Input[str]] = field(default_factory=dict)


class SystemdUnitProvider(HostProvider):
    replace_fields = ("unit",)
    update_fields = ("content", "restart_triggers", "slice", "health")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['connection']['host']}:{props['unit']}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        unit = props["unit"]
        q = shlex.quote
        with Session(props["connection"]) as host:
            host.write(f"{SYSTEM_UNIT_DIR}/{unit}", props["content"])
            host.run(f"systemctl daemon-reload && systemctl enable --quiet {q(unit)}"
                     f" && systemctl reset-failed {q(unit)} 2>/dev/null; systemctl restart {q(unit)}")
            self._wait_healthy(host, unit, props["health"])
            pid = host.run(f"systemctl show -p MainPID --value {q(unit)}").stdout.strip()
            if pid == "0":
                raise RemoteError(f"{unit} answered its health check but has no main process")
            cgroup = host.run(f"cat /proc/{int(pid)}/cgroup").stdout
            if not placement_ok(cgroup, props["slice"], unit):
                raise RemoteError(
                    f"{unit} runs outside {props['slice']}: /proc/{pid}/cgroup says\n{cgroup}"
                    f"expected the line {cgroup_line(props['slice'], unit)}")
        return {**props, "main_pid": int(pid),
                "cgroup": cgroup_line(props["slice"], unit),
                "started_at": time.time()}

    @staticmethod
    def _wait_healthy(host: Session, unit: str, health: dict[str, Any]) -> None:
        """Waits for HTTP 200 on the health endpoint while the unit is running; fails early,
        with the journal, if the service stops or keeps restarting (serve.sh refusing to start,
        or the port taken by something else, for instance).

        Only an answer from the unit's own main process counts: another server on the same
        port (the unit then fails to bind it and restarts) is never taken for this one.
        """
        deadline = time.monotonic() + float(health["timeout_seconds"])
        last = "no answer yet"
        while time.monotonic() < deadline:
            shown = host.run(f"systemctl show -p ActiveState -p NRestarts -p MainPID {shlex.quote(unit)}"
                             ).stdout
            state = dict(line.split("=", 1) for line in shown.split())
            if state.get("ActiveState") == "failed" or int(state.get("NRestarts", "0")) > 0:
                journal = host.run(f"journalctl -u {shlex.quote(unit)} -n 40 --no-pager -o cat",
                                   check=False).stdout
                raise RemoteError(f"{unit} did not stay up ({shown.split()}); its journal:\n"
                                  f"{tail(journal)}")
            if state.get("ActiveState") == "active" and state.get("MainPID", "0") != "0":
                try:
                    status, body = host.http(int(health["port"]), "GET", health["path"],
                                             address=health["address"], timeout=10)
                    listeners = listener_pids(host, int(health["port"]))
                    if status == 200 and state["MainPID"] in listeners:
                        return
                    last = (f"HTTP {status}: {body[:200]!r}" if status != 200 else
                            f"port {health['port']} is served by another process, not {unit}"
                            f" (main PID {state['MainPID']}; listening: {sorted(listeners) or 'not visible'})")
                except ConnectionError as err:
                    last = str(err)
            else:
                last = f"unit not running yet ({shown.split()})"
            time.sleep(1)
        raise RemoteError(f"{unit} not healthy after {health['timeout_seconds']} s"
                          f" ({health['address']}:{health['port']}{health['path']}: {last})")

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        unit = props["unit"]
        with Session(props["connection"]) as host:
            content = host.read(f"{SYSTEM_UNIT_DIR}/{unit}")
            active = host.run(f"systemctl is-active {shlex.quote(unit)}", check=False).stdout.strip()
        if content is None:
            return ReadResult(id_=None, outs={})
        return ReadResult(id_=id_, outs={**props, "content": content, "active_state": active})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        unit = shlex.quote(props["unit"])
        with Session(props["connection"]) as host:
            host.run(f"systemctl disable --now --quiet {unit} 2>/dev/null;"
                     f" rm -f {SYSTEM_UNIT_DIR}/{unit} && systemctl daemon-reload"
                     f" && systemctl reset-failed {unit} 2>/dev/null; true")


class SystemdUnit(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.SYSTEMD_UNIT.name):
    main_pid: pulumi.Output[int]
    cgroup: pulumi.Output[str]
    started_at: pulumi.Output[float]

    def __init__(self, name: str, args: SystemdUnitArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            SystemdUnitProvider(),
            name,
            {
                "connection": args.connection,
                "unit": args.unit,
                "unit_path": f"{SYSTEM_UNIT_DIR}/{args.unit}",
                "scope": "system",
                "content": args.content,
                "slice": args.slice,
                "health": vars(args.health),
                "restart_triggers": args.restart_triggers,
            },
            opts,
            outputs=("main_pid", "cgroup", "started_at", "active_state"),
        )
