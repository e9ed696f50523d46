"""Ports never collide: the backends' tunnel ports differ, and no two things on one host bind
the same port.

The stack policy sees every resource's final properties. A port a resource binds is declared
in its `binds` ({host: "<ssh host>:<ssh port>", address, port, what}); sshd holds the SSH port
of each such host. A host reached over SSH on a loopback address is this machine, whose ports
the client's backend tunnel takes too (the root stack's `backend` output). The backend table
is checked when the stack exports it as `backends` ({local, remote, reds} -> port).
"""

from __future__ import annotations

from collections import defaultdict

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from resources import STACK_TYPE, is_loopback, unknown_is_violation

SEED = "seed 000 §6.2.7 (the tunnel ports differ so the backends can be up at once)"
THIS_MACHINE = "this machine"


def _machine(host_id: str) -> str:
    """The machine whose ports a bind on "<ssh host>:<ssh port>" takes."""
    host = host_id.rsplit(":", 1)[0]
    return THIS_MACHINE if is_loopback(host.strip("[]")) else host


def ports_distinct(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        taken: dict[tuple[str, int], list[str]] = defaultdict(list)
        ssh_hosts: set[str] = set()
        for resource in args.resources:
            props = resource.props
            if resource.resource_type == STACK_TYPE:
                _check_backend_table(props.get("backends"), report)
                backend = props.get("backend")
                if backend:
                    taken[(THIS_MACHINE, int(backend["client_port"]))].append(
                        f"the {backend['name']} backend's SSH tunnel")
            for bind in props.get("binds") or ():
                taken[(_machine(bind["host"]), int(bind["port"]))].append(
                    f"{bind.get('what') or resource.name} ({resource.name}, on {bind['address']})")
                ssh_hosts.add(bind["host"])
        for host_id in ssh_hosts:
            taken[(_machine(host_id), int(host_id.rsplit(":", 1)[1]))].append(
                f"sshd (spear-fleet reaches {host_id} through it)")
        for (machine, port), users in sorted(taken.items()):
            if len(users) > 1:
                report(f"{SEED}: port {port} on {machine} is bound by {' and '.join(users)}; only"
                       " one can have it. Fix: give one of them another port (server.port,"
                       " backends.<name> or inferenceHost.ssh.port in the stack).")


def _check_backend_table(table, report: ReportViolation) -> None:
    """Reports backends that share a tunnel port (the table is optional, see the module doc)."""
    by_port: dict[int, list[str]] = defaultdict(list)
    for name, port in (table or {}).items():
        by_port[int(port)].append(name)
    for port, names in sorted(by_port.items()):
        if len(names) > 1:
            report(f"{SEED}: backends {', '.join(sorted(names))} share the tunnel port {port}, so"
                   " they cannot be up at once. Fix: give each backend its own port in"
                   " spear-fleet:backends.")


POLICY = StackValidationPolicy(
    name="ports-distinct",
    description="Backend tunnel ports differ, and no two things on one host bind the same port.",
    validate=ports_distinct,
    enforcement_level=EnforcementLevel.MANDATORY,
)
