"""Ports never collide: no two things on one machine bind the same port.

The stack policy sees every resource's final properties. A port a resource binds is declared
in its `binds` ({host: "<ssh host>:<ssh port>", address, port, what}); sshd holds the SSH port
of each such host. A host reached over SSH on a loopback address is this machine, whose ports
the client side's backends take too: the root stack's `backends` output ({name: {kind, port}})
gives each backend's client port, and the tunnel ports differ so every backend can be up at
once.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ReportViolation, StackValidationArgs, StackValidationPolicy

from policies.common import unknown_is_violation
from spear import tokens
from spear.rules import THIS_MACHINE, port_clashes

SEED = "seed 000 §6.2.7 (the tunnel ports differ so the backends can be up at once)"


def _host(host_id: str) -> str:
    """The host of "<ssh host>:<ssh port>"."""
    return host_id.rsplit(":", 1)[0]


def ports_distinct(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        binds: list[tuple[str, int, str]] = []
        ssh_hosts: set[str] = set()
        for resource in args.resources:
            props = resource.props
            if resource.resource_type == tokens.STACK:
                binds += [(THIS_MACHINE, int(backend["port"]), f"the {name} backend's client port")
                          for name, backend in sorted((props.get("backends") or {}).items())
                          if backend.get("port") is not None]
            for bind in props.get("binds") or ():
                binds.append((_host(bind["host"]), int(bind["port"]),
                              f"{bind.get('what') or resource.name} ({resource.name}, on"
                              f" {bind['address']})"))
                ssh_hosts.add(bind["host"])
        binds += [(_host(host_id), int(host_id.rsplit(":", 1)[1]),
                   f"sshd (spear-fleet reaches {host_id} through it)") for host_id in ssh_hosts]
        for (machine, port), users in sorted(port_clashes(binds).items()):
            report(f"{SEED}: port {port} on {machine} is bound by {' and '.join(users)}; only"
                   " one can have it. Fix: give one of them another port"
                   " (inferenceHosts.<name>.server.port, backends.<name>.port or"
                   " inferenceHosts.<name>.ssh.port in the stack).")


POLICY = StackValidationPolicy(
    name="ports-distinct",
    description="Backend tunnel ports differ, and no two things on one host bind the same port.",
    validate=ports_distinct,
    enforcement_level=EnforcementLevel.MANDATORY,
)
