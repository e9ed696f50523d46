"""The RunPod endpoint of seed 000 §6.2.7 (`remote`): a pod made through RunPod's API, and vLLM
serving the pinned model on it (seed 001 steps 2-3), reached by the client through an SSH tunnel.

Two resources, so that each diff is the upgrade: the pod's own fields update it through the API
(a reset) or, where the API cannot change them, recreate it; a new revision or vLLM flag only
restarts vLLM. vLLM logs in at the SSH endpoint the pod resource read from the API, so a pod that
restarted on another port is found again by `refresh` + `up`. After every start of vLLM the
cookbook's endpoint verification and the seed's smoke test run through the same login.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from cryptography.hazmat.primitives import serialization

from components.endpoints.pod_vllm import PodVllm, PodVllmArgs
from components.endpoints.runpod_pod import RunPodPod, RunPodPodArgs
from components.endpoints.proof import EndpointProofArgs, prove_endpoint
from components.endpoints.reach import Reach
from components.hostops.host_key import pinned_connection
from components.hostops.ssh import connection_input
from config.types import RunPodPod as PodConfig
from spear import tokens, vllm


def public_key_line(private_key: str) -> str:
    """The OpenSSH public key of a private key (OpenSSH or PEM form), as authorized_keys holds it."""
    data = private_key.encode()
    try:
        key = serialization.load_ssh_private_key(data, password=None)
    except ValueError:
        key = serialization.load_pem_private_key(data, password=None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


@dataclass
class RunPodEndpointArgs:
    config: PodConfig
    private_key: pulumi.Input[str]  # secret: the pod's SSH key
    runpod_api_key: pulumi.Input[str]  # secret
    vllm_api_key: pulumi.Input[str]  # secret: what vLLM demands of its clients


class RunPodEndpoint(pulumi.ComponentResource):
    def __init__(self, name: str, args: RunPodEndpointArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.RUNPOD_ENDPOINT, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cfg = args.config
        # Not a secret: RunPod images add PUBLIC_KEY to root's authorized_keys.
        public_key = pulumi.Output.unsecret(
            pulumi.Output.from_input(args.private_key).apply(public_key_line))

        self.pod = RunPodPod(f"{name}-pod", RunPodPodArgs(
            config=cfg,
            api_key=args.runpod_api_key,
            pod_name=f"spear-{pulumi.get_stack()}-{name}",
            env={"PUBLIC_KEY": public_key},
        ), child)

        argv = vllm.command_line(cfg.vllm)
        # A pod is known by its id: it moves to a new SSH port on every restart, and a new pod
        # (a replacement) has a new host key.
        self.host_key, connection = pinned_connection(
            name, pulumi.Output.secret(connection_input(
                self.pod.ssh_host, self.pod.ssh_port, cfg.ssh.user, args.private_key)),
            self.pod.pod_id.apply(lambda pod: f"runpod:{pod}"), None, child)
        self.vllm = PodVllm(f"{name}-vllm", PodVllmArgs(
            connection=connection,
            pod_id=self.pod.pod_id,
            endpoint={"host": self.pod.ssh_host, "port": self.pod.ssh_port},
            pod_started_at=self.pod.last_started_at,
            command_line=argv,
            image=cfg.image_name,
            api_key=args.vllm_api_key,
            port=cfg.vllm.port,
            served_model_name=cfg.vllm.served_model_name,
        ), child)

        # The cookbook's probes (model list, completion, tool call) through the same SSH login,
        # with the key, after every start of vLLM.
        self.proof = prove_endpoint(name, EndpointProofArgs(
            endpoint=name,
            connection=connection,
            port=cfg.vllm.port,
            served_model=cfg.vllm.served_model_name,
            api_key=args.vllm_api_key,
            triggers={"started_at": self.vllm.started_at},
        ), pulumi.ResourceOptions(parent=self, depends_on=[self.vllm]))

        self.backend = cfg.backend
        self.reach = Reach(endpoint=name, host_key=self.host_key.host_key, ssh_host=self.pod.ssh_host, ssh_port=self.pod.ssh_port,
                           ssh_user=cfg.ssh.user, private_key=args.private_key,
                           address="127.0.0.1", port=cfg.vllm.port,
                           served_model=cfg.vllm.served_model_name, api_key=args.vllm_api_key)

        self.outputs: dict[str, Any] = {
            "pod_id": self.pod.pod_id,
            "ssh_host": self.pod.ssh_host,
            "ssh_port": self.pod.ssh_port,
            "ssh_user": cfg.ssh.user,
            "ssh_host_key": self.host_key.outputs(),
            "command_line": argv,
            "served_model_name": cfg.vllm.served_model_name,
            "vllm_port": cfg.vllm.port,
            "vllm_started_at": self.vllm.started_at,
            **self.proof.outputs(cfg.backend),
        }
        self.register_outputs(self.outputs)
