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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.agent_seats import manifests
from components.gateway import HarnessPins
from config.types import AgentSandbox, Developer
from spear import tokens


@dataclass
class AgentSeatsArgs:
    sandbox: AgentSandbox  # the agent namespace, the seat image and the seats
    developers: dict[str, Developer]  # every seat's developer among them (the config check)
    gateway_url: str  # where a pod reaches the gateway (its pod_url)
    keys: Mapping[str, pulumi.Input[str]]  # developer -> their virtual key (secret)
    harnesses: HarnessPins  # the stack's harness versions and the window coder serves
    provider: k8s.Provider  # the fleet's cluster
    after: list[pulumi.Resource] = field(default_factory=list)  # the agent namespace, its policies


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
        for seat in sandbox.seats.values():
            entry = manifests.wiring(seat, args.gateway_url, args.harnesses.versions,
                                     args.harnesses.window)
            # `<name>-<seat>`: with the program's name `seat`, each resource is named as its
            # object is (seat-<seat>, seat-<seat>-key, seat-<seat>-wiring).
            prefix = f"{name}-{seat.name}"
            self.keys[seat.name] = k8s.core.v1.Secret(
                f"{prefix}-key", **manifests.key_secret(sandbox, seat),
                string_data={manifests.KEY_FIELD: pulumi.Output.secret(args.keys[seat.developer])},
                opts=on_cluster)
            pod_inputs: list[pulumi.Resource] = [self.keys[seat.name]]
            config_map = manifests.wiring_config_map(sandbox, seat, entry)
            if config_map is not None:
                self.wiring[seat.name] = k8s.core.v1.ConfigMap(f"{prefix}-wiring", **config_map,
                                                               opts=on_cluster)
                pod_inputs.append(self.wiring[seat.name])
            self.deployments[seat.name] = k8s.apps.v1.Deployment(
                prefix, **manifests.deployment(sandbox, seat, entry,
                                               args.developers[seat.developer].rotation),
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(
                    depends_on=pod_inputs)))
            self.outputs[seat.name] = {
                "developer": seat.developer, "harness": seat.harness, "version": entry["version"],
                "namespace": sandbox.namespace,
                "start": manifests.start_command(sandbox, seat, entry),
            }
        self.register_outputs(self.outputs)
