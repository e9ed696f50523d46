"""spear-fleet: typed stack config in, components out, stack outputs exported."""

import dataclasses

import pulumi

import stack_config
from components.inference_host import InferenceHost, InferenceHostArgs
from components.render import server_conf_settings

config = stack_config.load()

inference = InferenceHost("inference", InferenceHostArgs(
    host=config.inference_host,
    private_key=config.ssh_private_key,
    llama_cpp=config.llama_cpp,
    model=config.model,
    server=config.server,
    server_conf=server_conf_settings(config),
))

for key, value in inference.outputs.items():
    pulumi.export(key, value)
pulumi.export("backend", {"name": config.inference_host.backend, "client_port": config.client_port})
# The client-side tunnel ports of all backends, so the policy pack can check them for collisions.
pulumi.export("backends", dataclasses.asdict(config.backends))
