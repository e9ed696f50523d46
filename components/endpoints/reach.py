"""How a client on another machine reaches an endpoint: an SSH login to the endpoint's host and a
local forward to where its server listens there (the gateway's tunnel units use it).

Every endpoint family says it the same way, so the gateway routes `coder` to any of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi


@dataclass(frozen=True)
class Reach:
    endpoint: str  # the endpoint's name in the stack
    ssh_host: pulumi.Input[str]
    ssh_port: pulumi.Input[int]  # a pod's changes on every restart: an Output read from RunPod
    ssh_user: str
    private_key: pulumi.Input[str] | None  # secret; None: cannot be handed to another host
    address: str  # where the server listens on the endpoint's host
    port: int
    served_model: pulumi.Input[str]  # the model id to ask for
    api_key: pulumi.Input[str] | None = None  # secret: what the server demands, if anything
    host_key: pulumi.Input[str] | None = None  # what the SSH host must present (HostKey's)
