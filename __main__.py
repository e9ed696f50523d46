"""spear-fleet: typed stack config in, components out, stack outputs exported."""

import dataclasses

import pulumi

from components.inference_host import InferenceHost, InferenceHostArgs
from config.load import load

stack = load()

inference_hosts = {
    name: InferenceHost(name, InferenceHostArgs(config=host, private_key=stack.ssh_keys[name]))
    for name, host in stack.config.inference_hosts.items()
}

pulumi.export("inference_hosts", {name: host.outputs for name, host in inference_hosts.items()})
# The client side's backend table, so the policy pack can check the tunnel ports for collisions.
pulumi.export("backends", {name: dataclasses.asdict(backend)
                           for name, backend in stack.config.backends.items()})
