"""Resource type tokens: the one place that names each kind of spear-fleet resource.

Each Python dynamic resource class declares its own type (the SDK's
`Resource.__init_subclass__(module=..., name=...)` gives `pulumi-python:dynamic/<module>:<name>`),
and policies and the preview summary recognise resources by that type.
"""

from __future__ import annotations

from dataclasses import dataclass

DYNAMIC_MODULE = "spear"
STACK = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class Token:
    name: str  # the class name, the last part of the type

    @property
    def type(self) -> str:
        return f"pulumi-python:dynamic/{DYNAMIC_MODULE}:{self.name}"


# Dynamic resources (components/hostops, components/inference_host).
LLAMA_SERVER_BUILD = Token("LlamaServerBuild")
MODEL_FILES = Token("ModelFiles")
SERVER_CONF = Token("ServerConf")
LAUNCHER = Token("Launcher")
REMOTE_FILE = Token("RemoteFile")
SYSTEMD_UNIT = Token("SystemdUnit")
SMOKE_TEST = Token("SmokeTest")
ENDPOINT_VERIFICATION = Token("EndpointVerification")
HOST_KEY = Token("HostKey")  # the SSH host key a host must present (components/hostops/host_key.py)

# Dynamic resources of the RunPod endpoint (components/endpoints/runpod_pod.py, pod_vllm.py).
RUNPOD_POD = Token("RunPodPod")
POD_VLLM = Token("PodVllm")

# The dynamic resource of the REDS endpoint (components/endpoints/reds.py): it installs nothing.
REDS_TUNNEL_CHECK = Token("RedsTunnelCheck")

# Dynamic resources of the gateway (components/gateway/).
LITELLM_INSTALL = Token("LitellmInstall")
GATEWAY_DATABASE = Token("GatewayDatabase")
GATEWAY_BACKUP = Token("GatewayBackup")  # the timer that dumps the local database (backup.py)
GATEWAY_CONFIG = Token("GatewayConfig")
GATEWAY_ENV = Token("GatewayEnv")
GATEWAY_HOOK_FILE = Token("GatewayHookFile")
GATEWAY_TLS_FILE = Token("GatewayTlsFile")  # gateway.listen.tls's certificate and key
GATEWAY_SERVICE = Token("GatewayService")
TUNNEL_KEY = Token("TunnelKey")
TUNNEL_KNOWN_HOSTS = Token("TunnelKnownHosts")
GATEWAY_TUNNEL = Token("GatewayTunnel")
GATEWAY_SMOKE_TEST = Token("GatewaySmokeTest")
GATEWAY_KEY = Token("GatewayKey")
GATEWAY_ROLLOUT = Token("GatewayRollout")  # the gateway's Deployment in the cluster, waited for

# The fleet's throughput, measured after every change of a track's pair
# (components/vllm_fleet/throughput.py).
FLEET_THROUGHPUT = Token("FleetThroughput")

# Components.
INFERENCE_HOST = "spear:inference:InferenceHost"
RUNPOD_ENDPOINT = "spear:endpoints:RunPodEndpoint"
REDS_ENDPOINT = "spear:endpoints:RedsEndpoint"
GATEWAY = "spear:gateway:Gateway"
VLLM_FLEET = "spear:vllm:VllmFleet"
AGENT_SEATS = "spear:seats:AgentSeats"  # the agent seats in the fleet's sandbox namespace


@dataclass(frozen=True)
class ProviderType:
    """A type a provider plugin defines: pulumi-kubernetes' (`kubernetes:apps/v1:Deployment`) or
    pulumi-command's (`command:remote:Command`)."""
    type: str


# A one-shot operation on a host, run again when its triggers change (pulumi-command): the
# gateway host's migrations (components/gateway/database.py::run_migrations).
COMMAND_REMOTE = ProviderType("command:remote:Command")


# The fleet's Kubernetes objects (components/vllm_fleet, components/agent_seats), as policies
# and the preview summary match them.
K8S_PROVIDER = "pulumi:providers:kubernetes"
K8S_NAMESPACE = ProviderType("kubernetes:core/v1:Namespace")
K8S_SECRET = ProviderType("kubernetes:core/v1:Secret")
K8S_CONFIG_MAP = ProviderType("kubernetes:core/v1:ConfigMap")
K8S_PVC = ProviderType("kubernetes:core/v1:PersistentVolumeClaim")
K8S_PV = ProviderType("kubernetes:core/v1:PersistentVolume")
K8S_SERVICE = ProviderType("kubernetes:core/v1:Service")
K8S_DEPLOYMENT = ProviderType("kubernetes:apps/v1:Deployment")
K8S_JOB = ProviderType("kubernetes:batch/v1:Job")
# The other workloads, which the agent sandbox's policy judges wherever one runs there.
K8S_POD = ProviderType("kubernetes:core/v1:Pod")
K8S_STATEFUL_SET = ProviderType("kubernetes:apps/v1:StatefulSet")
K8S_DAEMON_SET = ProviderType("kubernetes:apps/v1:DaemonSet")
K8S_REPLICA_SET = ProviderType("kubernetes:apps/v1:ReplicaSet")
K8S_CRON_JOB = ProviderType("kubernetes:batch/v1:CronJob")
K8S_WORKLOADS = (K8S_DEPLOYMENT, K8S_POD, K8S_STATEFUL_SET, K8S_DAEMON_SET, K8S_REPLICA_SET,
                 K8S_JOB, K8S_CRON_JOB)
K8S_NETWORK_POLICY = ProviderType("kubernetes:networking.k8s.io/v1:NetworkPolicy")
# The node guard's account and its right to read and annotate the seats' pods.
K8S_SERVICE_ACCOUNT = ProviderType("kubernetes:core/v1:ServiceAccount")
K8S_ROLE = ProviderType("kubernetes:rbac.authorization.k8s.io/v1:Role")
K8S_ROLE_BINDING = ProviderType("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
