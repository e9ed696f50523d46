"""A system unit on a host: installed, enabled, (re)started, then proven healthy and placed.

Installing or changing it, or changing any of its restart triggers (the config it reads, the
launcher, the build, the model), runs `daemon-reload` and a restart. Then the update waits for
the service's health endpoint and checks the cgroup of its MainPID: the security model needs
the server in system.slice, disjoint from the user.slice scopes tool sandboxes run in.

Given the command line its main process must run, the update checks that too, and a refresh
records the one it runs: a service restarted by hand with other settings is drift, which the
next update repairs with a restart.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import RemoteError, Session, tail
from components.hostops.waiting import wait_until
from review.kinds import CONFIG_ONLY, Change, Kind, changed_keys, updates_only
from spear import tokens
from spear.rules import SYSTEM_UNIT_DIR, cgroup_line

def listener_pids(host: Session, port: int) -> set[str]:
    """PIDs of the processes listening on a TCP port on the host (`ss` from iproute2)."""
    out = host.run(f"ss -Hltnp 'sport = :{int(port)}'").stdout
    return set(re.findall(r"pid=(\d+)", out))


def main_pid(host: Session, unit: str) -> str:
    """The unit's main process ("0" when none runs)."""
    return host.run(f"systemctl show -p MainPID --value {shlex.quote(unit)}").stdout.strip()


def process_argv(host: Session, pid: str) -> list[str]:
    """A process's argv from /proc/<pid>/cmdline (NUL-terminated arguments); [] when none runs."""
    if pid == "0":
        return []
    return host.run(f"cat /proc/{int(pid)}/cmdline", check=False).stdout.split("\0")[:-1]


def runs_one_of(accepted: list[list[str]], running: list[str]) -> bool:
    """Whether a running argv has the arguments of one of the accepted argvs. argv[0] is not
    compared: it names the binary as its launcher found it (a real path on the host, a bare name
    at preview)."""
    return bool(running) and any(running[1:] == argv[1:] for argv in accepted)


def observed_command_line(accepted: list[list[str]], running: list[str]) -> list[str]:
    """What a refresh records: the expected argv (accepted[0]) when the main process runs one of
    the accepted ones, else the running arguments after the expected argv[0] (so a diff shows
    only the arguments), or [] when no main process runs."""
    expected = accepted[0]
    if runs_one_of(accepted, running):
        return expected
    return [expected[0], *running[1:]] if running else []


def command_line_mismatch(unit: str, accepted: list[list[str]], running: list[str]) -> str | None:
    """Why the main process's argv is none of the accepted ones, showing both; None when it is."""
    if runs_one_of(accepted, running):
        return None
    return (f"{unit} runs `{shlex.join(running) or '(no main process)'}`,"
            f" not the expected `{shlex.join(accepted[0])}`")


def accepted_command_lines(props: dict[str, Any]) -> list[list[str]]:
    """The expected argv first, then the launcher's documented fallbacks."""
    return [props["command_line"], *(props.get("fallback_command_lines") or [])]


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
    # The argv its main process must run (argv[0] is not compared); None: not checked.
    command_line: list[str] | None = None
    # Argvs the launcher runs instead by design (serve.sh serves the base model when the adapter
    # is unreadable): not drift.
    fallback_command_lines: list[list[str]] = field(default_factory=list)


class SystemdUnitProvider(HostProvider):
    replace_fields = ("unit",)
    update_fields = ("content", "restart_triggers", "slice", "health", "command_line")

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
            pid = main_pid(host, unit)
            if pid == "0":
                raise RemoteError(f"{unit} answered its health check but has no main process")
            cgroup = host.run(f"cat /proc/{int(pid)}/cgroup").stdout
            if not placement_ok(cgroup, props["slice"], unit):
                raise RemoteError(
                    f"{unit} runs outside {props['slice']}: /proc/{pid}/cgroup says\n{cgroup}"
                    f"expected the line {cgroup_line(props['slice'], unit)}")
            if props.get("command_line") is not None:
                mismatch = command_line_mismatch(unit, accepted_command_lines(props),
                                                 process_argv(host, pid))
                if mismatch:
                    # The journal says why when the launcher chose other arguments itself.
                    journal = host.run(f"journalctl -u {q(unit)} -n 20 --no-pager -o cat",
                                       check=False).stdout
                    raise RemoteError(f"{mismatch}; its journal:\n{tail(journal)}")
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
        last = "no answer yet"

        def healthy() -> bool:
            nonlocal last
            shown = host.run(f"systemctl show -p ActiveState -p NRestarts -p MainPID {shlex.quote(unit)}"
                             ).stdout
            state = dict(line.split("=", 1) for line in shown.split())
            if state.get("ActiveState") == "failed" or int(state.get("NRestarts", "0")) > 0:
                journal = host.run(f"journalctl -u {shlex.quote(unit)} -n 40 --no-pager -o cat",
                                   check=False).stdout
                raise RemoteError(f"{unit} did not stay up ({shown.split()}); its journal:\n"
                                  f"{tail(journal)}")
            if state.get("ActiveState") != "active" or state.get("MainPID", "0") == "0":
                last = f"unit not running yet ({shown.split()})"
                return False
            try:
                status, body = host.http(int(health["port"]), "GET", health["path"],
                                         address=health["address"], timeout=10)
                listeners = listener_pids(host, int(health["port"]))
            except ConnectionError as err:
                last = str(err)
                return False
            if status == 200 and state["MainPID"] in listeners:
                return True
            last = (f"HTTP {status}: {body[:200]!r}" if status != 200 else
                    f"port {health['port']} is served by another process, not {unit}"
                    f" (main PID {state['MainPID']}; listening: {sorted(listeners) or 'not visible'})")
            return False

        if not wait_until(healthy, float(health["timeout_seconds"])):
            raise RemoteError(f"{unit} not healthy after {health['timeout_seconds']} s"
                              f" ({health['address']}:{health['port']}{health['path']}: {last})")

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        unit = props["unit"]
        expected = props.get("command_line")
        with Session(props["connection"]) as host:
            content = host.read(f"{SYSTEM_UNIT_DIR}/{unit}")
            active = host.run(f"systemctl is-active {shlex.quote(unit)}", check=False).stdout.strip()
            running = process_argv(host, main_pid(host, unit)) if expected is not None else []
        if content is None:
            return ReadResult(id_=None, outs={})
        outs = {**props, "content": content, "active_state": active}
        if expected is not None:
            outs["command_line"] = observed_command_line(accepted_command_lines(props), running)
        return ReadResult(id_=id_, outs=outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        unit = shlex.quote(props["unit"])
        with Session(props["connection"]) as host:
            host.run(f"systemctl disable --now --quiet {unit} 2>/dev/null;"
                     f" rm -f {SYSTEM_UNIT_DIR}/{unit} && systemctl daemon-reload"
                     f" && systemctl reset-failed {unit} 2>/dev/null; true")


def unit_name(inputs: Mapping[str, Any]) -> str:
    return inputs.get("unit", "systemd unit")


@updates_only
def unit_details(change: Change) -> list[str]:
    """Which restart triggers changed (what restarts the unit), then any other input."""
    old, new = change.old, change.new
    triggers = changed_keys(old.get("restart_triggers") or {}, new.get("restart_triggers") or {})
    lines = [f"restarts: {', '.join(triggers)} changed"] if triggers else []
    return lines + [f"`{k}` changed" for k in changed_keys(old, new) if k != "restart_triggers"]


KIND = Kind.of(tokens.SYSTEMD_UNIT, unit_name, CONFIG_ONLY, details=unit_details, restarts=True,
               meanings={CONFIG_ONLY: "daemon-reload and restart, then waits for /health and"
                                      " checks the unit is in its slice"})

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
                "command_line": args.command_line,
                "fallback_command_lines": args.fallback_command_lines,
            },
            opts,
            outputs=("main_pid", "cgroup", "started_at", "active_state"),
        )
