"""Agent seats (seed 001 step 7, "Sandbox what the agent executes"): one sandboxed pod per
declared seat in the fleet's agent namespace, where a developer runs their harness against the
gateway with their own virtual key.

Per seat (components/agent_seats/manifests.py): the Secret `seat-<name>-key` with the
developer's key (a Pulumi secret, from the gateway's key resource), the harness's wiring file as
a ConfigMap when it has one, and the Deployment `seat-<name>`: one pod as user 1000 with every
capability dropped, no new privileges, a read-only root, no service account token, the working
copy the only writable mount, the key the only credential (spear/seats.py says what that minimum
is; the policy pack checks it). On the fleet's own provider, after the agent namespace and its
egress policies, so no seat runs before its egress is denied.

Per harness the seats run, its dialect check first: the Job `seat-dialect-<harness>` runs one real
turn of that harness in the same sandbox, through the gateway with the key of
`agentSandbox.dialectCheckDeveloper` (its own Secret and wiring beside it). A bump of the
harness replaces the Job, so the check runs again, and the harness's seats wait for it: a version
whose dialect the gateway no longer speaks fails the `up` before any seat runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.agent_seats import manifests
from components.gateway.access import HarnessPins
from config.types import AgentSandbox, Developer, Seat
from spear import tokens


@dataclass
class AgentSeatsArgs:
    sandbox: AgentSandbox  # the agent namespace, the seat image and the seats
    developers: dict[str, Developer]  # every seat's developer among them (the config check)
    gateway_url: str  # where a pod reaches the gateway (its pod_url): by its TLS name
    trust: manifests.GatewayTrust  # that name's address, and the root a seat trusts
    keys: Mapping[str, pulumi.Input[str]]  # developer -> their virtual key (secret)
    harnesses: HarnessPins  # the stack's harness versions and the window coder serves
    provider: k8s.Provider  # the fleet's cluster
    after: list[pulumi.Resource] = field(default_factory=list)  # the agent namespace, its policies


# Each guard kind's API group, its class looked up when a guard is made: the SDK loads a group's
# modules on first use, and a stack with no cluster should not pay for them (0.6 s a preview).
_GUARD_GROUPS = {"Namespace": "core", "ServiceAccount": "core", "Role": "rbac",
                 "RoleBinding": "rbac", "ConfigMap": "core", "DaemonSet": "apps"}


class AgentSeats(pulumi.ComponentResource):
    def __init__(self, name: str, args: AgentSeatsArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.AGENT_SEATS, name, None, opts)
        sandbox = args.sandbox
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider,
                                            depends_on=list(args.after))
        self.keys: dict[str, k8s.core.v1.Secret] = {}
        self.wiring: dict[str, k8s.core.v1.ConfigMap] = {}
        self.deployments: dict[str, k8s.apps.v1.Deployment] = {}
        self.outputs: dict[str, Any] = {}
        self.checks: dict[str, k8s.batch.v1.Job] = {}
        # The node guard first: every seat's pod waits for it (manifests.GUARDED_SCRIPT).
        self.guard: list[pulumi.Resource] = []
        for kind, obj in manifests.guard_objects(sandbox, args.trust):
            if "roleRef" in obj:  # the SDK's one argument not named as in the API
                obj = {**obj, "role_ref": obj["roleRef"]}
                del obj["roleRef"]
            self.guard.append(getattr(getattr(k8s, _GUARD_GROUPS[kind]).v1, kind)(
                f"{name}-{manifests.GUARD}-{kind.lower()}", **obj,
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(
                    depends_on=list(self.guard)))))
        self.ca = k8s.core.v1.ConfigMap(f"{name}-gateway-ca",
                                        **manifests.ca_config_map(sandbox, args.trust),
                                        opts=on_cluster)
        for harness_name in sorted({seat.harness for seat in sandbox.seats.values()}):
            check = manifests.dialect_check(sandbox, harness_name)
            entry = manifests.wiring(check, args.gateway_url, args.harnesses.versions,
                                     args.harnesses.window)
            inputs = self._key_and_wiring(f"{name}-{check.name}", check, entry, args, on_cluster)
            # Same name on a bump: the old Job goes before the new one is made.
            self.checks[harness_name] = k8s.batch.v1.Job(
                f"{name}-{check.name}", **manifests.dialect_check_job(sandbox, check, entry,
                                                                      args.trust),
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(
                    depends_on=[*inputs, self.ca, *self.guard[-1:]],
                    delete_before_replace=True)))
        for seat in sandbox.seats.values():
            entry = manifests.wiring(seat, args.gateway_url, args.harnesses.versions,
                                     args.harnesses.window)
            # `<name>-<seat>`: with the program's name `seat`, each resource is named as its
            # object is (seat-<seat>, seat-<seat>-key, seat-<seat>-wiring).
            prefix = f"{name}-{seat.name}"
            pod_inputs = self._key_and_wiring(prefix, seat, entry, args, on_cluster)
            self.deployments[seat.name] = k8s.apps.v1.Deployment(
                prefix, **manifests.deployment(sandbox, seat, entry, args.trust,
                                               args.developers[seat.developer].rotation),
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(
                    depends_on=[*pod_inputs, self.ca, self.checks[seat.harness]])))
            self.outputs[seat.name] = {
                "developer": seat.developer, "harness": seat.harness, "version": entry["version"],
                "namespace": sandbox.namespace,
                "start": manifests.start_command(sandbox, seat, entry),
            }
        self.register_outputs(self.outputs)

    def _key_and_wiring(self, prefix: str, seat: Seat, entry: dict[str, Any], args: AgentSeatsArgs,
                        on_cluster: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """The seat's key Secret and, when its harness has a wiring file, its ConfigMap."""
        sandbox = args.sandbox
        self.keys[seat.name] = k8s.core.v1.Secret(
            f"{prefix}-key", **manifests.key_secret(sandbox, seat),
            string_data={manifests.KEY_FIELD: pulumi.Output.secret(args.keys[seat.developer])},
            opts=on_cluster)
        made: list[pulumi.Resource] = [self.keys[seat.name]]
        config_map = manifests.wiring_config_map(sandbox, seat, entry)
        if config_map is not None:
            self.wiring[seat.name] = k8s.core.v1.ConfigMap(f"{prefix}-wiring", **config_map,
                                                           opts=on_cluster)
            made.append(self.wiring[seat.name])
        return made
