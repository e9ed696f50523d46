"""The typed stack configuration: frozen dataclasses that `config.schema.parse` returns.

Plain values only: secrets arrive as their text here and become Pulumi secrets in
`config.load`, the one module that imports Pulumi. A type of more than three fields is built
with keywords only (kw_only), so a field added or moved cannot shift values into its neighbours.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from spear.rollout_gate import Policy as GatePolicy
from spear.rollout_gate import Record as GateRecord
from spear.rollout_gate import Refused as RefusedRecord
from spear.rules import DEFAULT_PRIORITY_CLASS, GENERAL_RING, is_loopback
from spear.vllm import GPU_MEMORY_UTILIZATION, TOOL_CALL_PARSER

# cmake flags that are a property of the build profile. GGML_NATIVE is off so a build does not
# depend on the CPU it was compiled on; the prebuilt web UI is off because fetching it needs
# the internet; tests and examples are off because only llama-server is installed.
_COMMON_CMAKE_FLAGS = (
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    # On by default when libssl-dev happens to be installed: off, so every host builds the same
    # thing (the server listens on loopback only and downloads nothing).
    "-DLLAMA_OPENSSL=OFF",
)
PROFILE_CMAKE_FLAGS = {
    "gpu": ("-DGGML_CUDA=ON", *_COMMON_CMAKE_FLAGS),
    "cpu": ("-DGGML_CUDA=OFF", *_COMMON_CMAKE_FLAGS),
}


# --------------------------------------------------------------------------------------------
# Backends (seed 000 §6.2.7)

PORT = "port"  # clients reach it on 127.0.0.1:<port> of their machine (a local server or a tunnel)
API = "api"  # a provider's hosted API: nothing local, no port
BACKEND_KINDS = (PORT, API)


@dataclass(frozen=True, kw_only=True)
class Backend:
    name: str
    kind: str  # PORT or API
    port: int | None  # the client-side port: set for PORT backends, None for API ones
    what: str  # what reaches it, for people reading errors and outputs


# --------------------------------------------------------------------------------------------
# Inference hosts


@dataclass(frozen=True)
class InlineKey:
    """An SSH private key given as a secret in the stack (sshPrivateKeys.<host>)."""
    text: str

    def __repr__(self) -> str:
        return "InlineKey(<secret>)"


@dataclass(frozen=True)
class KeyFile:
    """An SSH private key in a file on this machine (ssh.privateKeyPath), `~` expanded."""
    path: str


@dataclass(frozen=True, kw_only=True)
class SshTarget:
    host: str
    port: int
    user: str
    key: InlineKey | KeyFile
    # The host key it must present (`<type> <base64>`); None: recorded at first contact, or
    # known_hosts' (components/hostops/known_hosts.py).
    host_key: str | None = None

    @property
    def is_loopback(self) -> bool:
        """True when the host is this machine (its ports share this machine's port space)."""
        return is_loopback(self.host)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class GitSource:
    url: str
    commit: str  # 40 lowercase hex


@dataclass(frozen=True)
class ArchiveSource:
    archive: str  # absolute local path (`~` expanded) or http(s) URL
    sha256: str  # 64 lowercase hex
    subdir: str  # relative path of the llama.cpp tree inside the archive, "." for its root


@dataclass(frozen=True)
class LlamaCpp:
    source: GitSource | ArchiveSource
    profile: str  # a key of PROFILE_CMAKE_FLAGS
    extra_cmake_flags: tuple[str, ...]

    @property
    def cmake_flags(self) -> tuple[str, ...]:
        """The profile's flags, then the stack's extra ones (cmake lets a later -D win)."""
        return PROFILE_CMAKE_FLAGS[self.profile] + self.extra_cmake_flags


@dataclass(frozen=True, kw_only=True)
class Shard:
    name: str  # file name under <runtime>/models/gguf/
    size: int  # bytes
    sha256: str  # 64 lowercase hex
    source: str | None  # absolute local path (`~` expanded) or http(s) URL; None: already there


@dataclass(frozen=True, kw_only=True)
class Model:
    arch: str  # llama.cpp architecture name, the prefix of its GGUF keys
    native_ctx: int  # the context length the model was trained at
    moe: bool
    shards: tuple[Shard, ...]
    adapter: str | None  # file name under <runtime>/models/lora/; None: the base model


@dataclass(frozen=True, kw_only=True)
class Server:
    ctx_size: int
    host: str
    port: int
    threads: int | None  # None: llama-server's default
    gpu_layers: int | None  # None: llama-server's default
    cpu_moe: int | None  # MoE layers kept on the CPU; None: serve.sh's default for MoE models
    parallel: int


@dataclass(frozen=True, kw_only=True)
class InferenceHost:
    name: str  # the key in inferenceHosts; names its resources
    ssh: SshTarget
    runtime_dir: str  # absolute POSIX path on the host, normalised, no trailing slash
    backend: Backend  # the client backend that reaches this server (a PORT backend)
    llama_cpp: LlamaCpp
    model: Model
    server: Server


# --------------------------------------------------------------------------------------------
# The whole stack


@dataclass(frozen=True, kw_only=True)
class FleetConfig:
    inference_hosts: dict[str, InferenceHost]
    backends: dict[str, Backend]
    runpod_pods: dict[str, RunPodPod]  # {} when the stack declares none
    api_keys: dict[str, ApiKey]  # API_KEY_NAMES given by the stack
    reds_endpoints: dict[str, RedsEndpoint]  # {} when the stack declares none
    gateway: Gateway | None  # None when the stack declares none
    developers: dict[str, Developer]  # {} when the stack declares none
    harnesses: dict[str, str]  # harness -> the exact version its wiring installs
    vllm_fleet: VllmFleet | None = None  # the vLLM fleet on Kubernetes, when declared


# --------------------------------------------------------------------------------------------
# RunPod pods (seed 000 §6.2.7: the `remote` backend; seed 001 steps 2-3: the pinned model,
# served by vLLM)

CLOUD_TYPES = ("SECURE", "COMMUNITY")
# The stack's top-level secrets other than SSH keys: the RunPod API key, and the key vLLM
# demands of its clients.
RUNPOD_API_KEY = "runpodApiKey"
VLLM_API_KEY = "vllmApiKey"
API_KEY_NAMES = (RUNPOD_API_KEY, VLLM_API_KEY)


@dataclass(frozen=True)
class ApiKey:
    """An API key given as a secret in the stack."""
    text: str

    def __repr__(self) -> str:
        return "ApiKey(<secret>)"


@dataclass(frozen=True, kw_only=True)
class Vllm:
    """What `vllm serve` is told (spear/vllm.py renders the command line from it)."""
    model: str  # Hugging Face repository id, e.g. Qwen/Qwen3-Coder-Next-FP8
    revision: str  # the model repository's commit: 40 lowercase hex
    served_model_name: str
    tensor_parallel_size: int
    max_model_len: int
    port: int
    gpu_memory_utilization: str = GPU_MEMORY_UTILIZATION  # as vLLM is given it, e.g. "0.90"
    scheduling_priority: bool = False  # --scheduling-policy priority (the gateway stamps priorities)
    tool_call_parser: str = TOOL_CALL_PARSER  # a name spear/vllm.py's table gives the engine


@dataclass(frozen=True)
class PodSsh:
    """How spear-fleet logs in to the pod; the address is RunPod's to give (read from its API)."""
    user: str
    key: InlineKey | KeyFile


@dataclass(frozen=True, kw_only=True)
class RunPodPod:
    name: str  # the key in runpod.pods; names its resources
    api_url: str  # RunPod's REST API v1, without a trailing slash
    gpu_type_ids: tuple[str, ...]
    gpu_count: int
    image_name: str
    container_disk_in_gb: int
    volume_in_gb: int
    cloud_type: str  # one of CLOUD_TYPES
    ports: tuple[str, ...]  # "<port>/<tcp|http>", always with 22/tcp
    backend: Backend  # the client backend that reaches vLLM through the SSH tunnel
    ssh: PodSsh
    vllm: Vllm


# --------------------------------------------------------------------------------------------
# REDS endpoints (seed 000 §6.2.7: the `reds` backend). The REDS host is a stable host:
# spear-fleet installs nothing there; it opens the tunnel and checks that something answers.


@dataclass(frozen=True, kw_only=True)
class RedsSsh:
    """How spear-fleet logs in to a REDS host. What the stack leaves out comes from the host's
    entry in ~/.ssh/config when the connection is made (an alias is preferred: it already holds
    the user, key and auth quirks), and otherwise port 22 and user root."""
    host: str  # host name, IP address or ~/.ssh/config alias
    port: int | None
    user: str | None
    key: InlineKey | KeyFile | None  # None: the alias's IdentityFile
    host_key: str | None = None  # as SshTarget.host_key


@dataclass(frozen=True, kw_only=True)
class RedsEndpoint:
    name: str  # the key in redsEndpoints; names its resources
    ssh: RedsSsh  # the stack's `ssh`, or the managed inference host's own login
    address: str  # where the server listens on the host
    port: int  # the server's port on the host (SPEAR_SERVER_PORT there)
    model_id: str | None  # the id it must advertise; None: the first one /v1/models lists
    backend: Backend  # the client backend whose SSH tunnel reaches it (a PORT backend)
    inference_host: str | None  # a name in inferenceHosts when this stack manages the server

    @property
    def server(self) -> str:
        """The config key of what serves it, for messages and the one-server-per-tunnel check."""
        return (f"inferenceHosts.{self.inference_host}" if self.inference_host
                else f"redsEndpoints.{self.name}")


# --------------------------------------------------------------------------------------------
# The gateway (seed 001 steps 5-6): LiteLLM between every developer and the fleet

GATEWAY_MASTER_KEY = "gatewayMasterKey"  # the proxy's admin credential, never a developer's
FRONTIER_API_KEY = "frontierApiKey"  # the hatch provider's key; never leaves the gateway host
GATEWAY_DATABASE_URL = "gatewayDatabaseUrl"  # an external PostgreSQL (with its password)
# gateway.kubernetes.tls's certificate bundle (PEM: its own, its chain, the root) and key.
GATEWAY_TLS_CERTIFICATE = "gatewayTlsCertificate"
GATEWAY_TLS_KEY = "gatewayTlsKey"
# What the gateway database's dumps are encrypted with (gateway.database.backup).
GATEWAY_BACKUP_KEY = "gatewayBackupKey"
GATEWAY_SECRET_NAMES = (GATEWAY_MASTER_KEY, FRONTIER_API_KEY, GATEWAY_DATABASE_URL,
                        GATEWAY_TLS_CERTIFICATE, GATEWAY_TLS_KEY, GATEWAY_BACKUP_KEY)

LOCAL_DATABASE = "local"  # PostgreSQL from Debian on the gateway host
EXTERNAL_DATABASE = "external"  # gatewayDatabaseUrl
DATABASE_LOCATIONS = (LOCAL_DATABASE, EXTERNAL_DATABASE)
NATIVE_ENGINE = "native"  # Prisma's own query engine binary, downloaded at first use
OFFLINE_ENGINE = "offline"  # Prisma's WebAssembly engine from npm (hosts/gateway/prisma-offline)
QUERY_ENGINES = (NATIVE_ENGINE, OFFLINE_ENGINE)


@dataclass(frozen=True)
class PackageSource:
    """Where the gateway host's pip gets LiteLLM: an index, or a wheelhouse folder on the host
    (an air-gapped host; the local stack's is prepared on this machine)."""
    index_url: str | None
    wheelhouse: str | None  # absolute path on the gateway host


@dataclass(frozen=True)
class DatabaseBackupPlan:
    """gateway.database.backup: pg_dump of the local database by a timer on the gateway host."""
    folder: str  # on the gateway host; a mount that outlives the host
    on_calendar: str  # a systemd calendar expression (checked by the host's systemd)
    keep: int  # the newest dumps kept


@dataclass(frozen=True, kw_only=True)
class ClusterBackupPlan:
    """gateway.database.backup with gateway.kubernetes: pg_dump of the external database by a
    CronJob in the gateway's namespace, into a volume that outlives the gateway."""
    schedule: str  # a cron expression
    keep: int  # the newest dumps kept
    host_path: str | None  # a folder on the node (a one-node cluster, the local one)
    claim: str | None  # or a PersistentVolumeClaim of the namespace that the operator provides


@dataclass(frozen=True, kw_only=True)
class GatewayDatabase:
    location: str  # one of DATABASE_LOCATIONS
    port: int  # the local cluster's port on the gateway host (unused when external)
    query_engine: str  # one of QUERY_ENGINES
    # On a gateway host (the local database); in the cluster (the external database) a CronJob.
    backup: DatabaseBackupPlan | ClusterBackupPlan | None = None
    restore_from: str | None = None  # a dump of the backups, loaded into a database made anew


@dataclass(frozen=True)
class Pricing:
    """What a fleet token costs a developer's budget (an internal charge: the fleet's GPUs are
    paid either way, and budgets need a price to hold)."""
    input_usd_per_token: float
    output_usd_per_token: float


@dataclass(frozen=True, kw_only=True)
class Hatch:
    """The frontier escape hatch: `frontier`, used only when the fleet answered 429/5xx."""
    model: str  # the provider's model id, e.g. claude-sonnet-4-5
    api_base: str  # the provider's API, without a trailing slash
    monthly_cap_usd: float  # hard: over it, escalations are refused
    alert_usd: float  # the spend alert, below the cap
    pricing: Pricing  # what the provider charges: the cap is counted with it


@dataclass(frozen=True, kw_only=True)
class GatewayCluster:
    """The gateway as a Deployment in the fleet's cluster instead of on a host (the cookbook: it
    "is stateless apart from Postgres and scales horizontally"): its replicas share one
    external PostgreSQL, and the budgets hold across them (the ledger is in that database)."""
    namespace: str
    replicas: int  # at least 2
    image: str  # pinned; holds LiteLLM at litellm.version, python3, bash and psql
    venv: str  # the image's LiteLLM virtualenv (bin/litellm, litellm_proxy_extras' migrations)
    service_ip: str | None  # the gateway Service's fixed cluster IP; None: one is assigned
    tls: GatewayTls | None = None  # None: plain HTTP (no agent seat may then reach it)
    node_port: int | None = None  # where developers outside the cluster reach it (with tls)


@dataclass(frozen=True)
class GatewayTls:
    """gateway.kubernetes.tls or gateway.listen.tls: the gateway serves HTTPS under `name` with
    the stack's certificate (gatewayTlsCertificate, gatewayTlsKey: secrets), and its clients
    trust `root_pem`."""
    name: str  # the DNS name in the certificate, which seats resolve to the gateway's address
    root_pem: str  # the bundle's self-signed root (public)


@dataclass(frozen=True)
class TlsListener:
    """gateway.listen.tls: the gateway host's HTTPS listener beside its loopback HTTP, on an
    address seats and developers reach (never loopback)."""
    address: str
    port: int
    tls: GatewayTls


@dataclass(frozen=True, kw_only=True)
class Gateway:
    name: str  # names its resources
    ssh: SshTarget | None  # None: the gateway runs in the cluster (kubernetes)
    runtime_dir: str
    host: str  # where the proxy listens on the gateway host
    port: int
    litellm_version: str
    packages: PackageSource
    database: GatewayDatabase
    upstreams: tuple[str, ...]  # endpoint names `coder` routes to (hosts, pods, REDS endpoints)
    num_retries: int
    request_timeout: int  # seconds
    pricing: Pricing
    hatch: Hatch
    kubernetes: GatewayCluster | None = None
    tls_listener: TlsListener | None = None  # on a gateway host: its HTTPS beyond loopback

    @property
    def placement(self) -> str:
        """Where it runs: `host` (a gateway host, gateway.ssh) or `kubernetes` (the fleet's
        cluster, gateway.kubernetes); components/gateway/__init__.py has one of each."""
        return "host" if self.kubernetes is None else "kubernetes"


# --------------------------------------------------------------------------------------------
# Developers (seed 001 step 5, "Budget hygiene"): one virtual key each, with a budget that resets


@dataclass(frozen=True, kw_only=True)
class Developer:
    name: str  # the key in developers; the key's alias and metadata.developer
    team: str | None
    models: tuple[str, ...]  # gateway model names the key may use
    max_budget: float  # USD per budget window
    budget_duration: str  # LiteLLM's window: "30d", "1mo", ...
    tpm_limit: int | None
    rpm_limit: int | None
    max_parallel_requests: int | None
    metadata: dict[str, str]
    rotation: int  # bump to rotate the key (/key/regenerate); the old one lives the grace period
    rotation_grace: str  # e.g. "24h"
    # What the gateway stamps on the key's requests (its metadata; spear_gateway/tenancy.py):
    ring: str = GENERAL_RING  # PILOT_RING: served by the fleet's canary while one is up
    priority: str = DEFAULT_PRIORITY_CLASS  # spear.rules.PRIORITY_CLASSES: interactive 0, background 10
# The vLLM fleet on Kubernetes (seed 001 steps 2-3, 7-8, "How to run it in production", "How to
# maintain it"): a stable (image, revision) pair, optionally a canary pair beside it, the
# previous stable pair kept declared for rollback, and the rollout gate's records.

AMBIENT = "ambient"  # the kubeconfig of whoever runs pulumi: $KUBECONFIG or ~/.kube/config
ACCESS_MODES = ("ReadWriteMany", "ReadWriteOnce")


@dataclass(frozen=True)
class Kubeconfig:
    """Where the provider finds the cluster: the stack's `kubeconfig` secret, a kubeconfig file on
    this machine, or (both None) the ambient one."""
    secret_text: str | None
    path: str | None
    context: str | None  # None: the kubeconfig's current context

    def __repr__(self) -> str:
        where = "<secret>" if self.secret_text else (self.path or AMBIENT)
        return f"Kubeconfig({where}, context={self.context!r})"


@dataclass(frozen=True, kw_only=True)
class ServingPair:
    """What a rollout moves together: the engine (image tag, optionally its digest) and the
    model revision (seed 001 "How to maintain it": the previous pair stays deployable)."""
    tag: str  # the image tag: the engine version, e.g. v0.24.0
    digest: str | None  # "sha256:<64 hex>" or None
    model: str  # Hugging Face repository id
    revision: str  # 40 lowercase hex

    @property
    def key(self) -> tuple[str, str, str]:
        """What a gate record must pin exactly (spear/rollout_gate.py's Pair)."""
        return (self.tag, self.model, self.revision)


@dataclass(frozen=True)
class Canary:
    pair: ServingPair
    replicas: int


@dataclass(frozen=True)
class EgressTarget:
    name: str
    cidr: str | None  # an IP network, normalised; None for the in-cluster gateway's pods
    ports: tuple[int, ...]  # TCP
    # The in-cluster gateway: its namespace and its pods' labels (spear/rules.py::pods_peer).
    pods: tuple[str, tuple[tuple[str, str], ...]] | None = None


@dataclass(frozen=True, kw_only=True)
class Seat:
    """One agent seat (seed 001 step 7): a developer's harness in a sandboxed pod of the agent
    namespace, with that developer's virtual key as its only credential."""
    name: str  # the key in agentSandbox.seats; names its objects (seat-<name>)
    developer: str  # a developer of the stack: whose key the seat holds
    harness: str  # one of spear.harness.HARNESSES
    workspace_size: str  # a Kubernetes quantity: the working copy's emptyDir limit


@dataclass(frozen=True, kw_only=True)
class AgentSandbox:
    namespace: str
    # Taken from `gateway` (config/schema/__init__.py): None without one a pod can reach.
    gateway: EgressTarget | None
    mirrors: tuple[EgressTarget, ...]
    seat_image: str | None = None  # pinned by digest; required with seats
    seats: dict[str, Seat] = field(default_factory=dict)  # by name; {} when none is declared
    # Whose key each seated harness's dialect check asks with (required with seats).
    dialect_check_developer: str | None = None
    node_guard: NodeGuard | None = None  # required with seats
    # The RuntimeClass every workload of the namespace runs with (a sandbox runtime: gVisor's);
    # None: the node's default runtime.
    runtime_class: str | None = None


@dataclass(frozen=True, kw_only=True)
class NodeGuard:
    """What keeps seats off their node: a DaemonSet filtering their traffic in its nftables."""
    image: str  # python3 and nft, pinned by digest
    api_server: str | None  # None: the cluster's `kubernetes` Service


@dataclass(frozen=True, kw_only=True)
class ModelCache:
    size: str  # a Kubernetes quantity, e.g. 200Gi
    storage_class: str | None  # None: the cluster's default
    access_mode: str  # one of ACCESS_MODES
    host_path: str | None  # a static volume on the node (clusters without a provisioner)


@dataclass(frozen=True, kw_only=True)
class Alerts:
    preemptions_per_hour: int
    ttft_p95_seconds: float
    itl_p95_seconds: float  # inter-token latency, the other latency SLO
    prefix_cache_hit_rate_min: float
    hatch_escalations_per_hour: int
    # The hatch's spend alert and cap are gateway.hatch's (declared once, with the gateway).
    # A track's prefill or decode tokens/s below this share of its last measurement fails the
    # `up` after a pair change (components/vllm_fleet/throughput.py); None: only recorded.
    throughput_min_ratio: float | None = None


# Who evaluates the alert rules and scrapes the fleet and the gateway: nobody the stack runs (the
# rules and the dashboard are ConfigMaps for a Prometheus of your own), a Prometheus the stack
# runs in the cluster, or the Prometheus Operator's objects (PrometheusRule, PodMonitor,
# ScrapeConfig) for a cluster that runs the Operator.
PROMETHEUS_MODES = ("none", "bundled", "operator")


@dataclass(frozen=True, kw_only=True)
class Prometheus:
    mode: str  # one of PROMETHEUS_MODES
    scrape_interval_seconds: int  # scrapes and rule evaluations
    image: str | None = None  # bundled: the server's image, pinned
    port: int = 9090  # bundled: where it listens on the node's network
    retention: str = "15d"  # bundled: how long it keeps samples
    # bundled: the API server its pod discovery asks; None: the cluster's own `kubernetes`
    # Service (a cluster whose API server advertises a loopback address has no endpoint there)
    api_server: str | None = None
    # operator: the labels the Operator's ruleSelector and monitor selectors match
    selector_labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelFacts:
    """What the memory floor is computed from (the model card's facts, declared by the stack)."""
    parameters_billions: float
    precision: str  # a key of spear.vllm.BYTES_PER_PARAMETER
    kv_cache_bytes_per_token: float


@dataclass(frozen=True)
class MemoryFloor:
    gpu_memory_gib: float  # each GPU's
    models: dict[str, ModelFacts]  # by Hugging Face repository id


@dataclass(frozen=True, kw_only=True)
class RolloutGate:
    """The stack's gate policy and the records scripts/gate wrote, as the config check found them."""
    policy: GatePolicy
    records: tuple[GateRecord, ...]  # each judged against its evidence, and standing
    refused: tuple[RefusedRecord, ...]  # the others, and why: they block their promotion alone
    written: dict[str, Any]  # record name -> the record file as the run wrote it
    evidence: dict[str, bytes]  # record name -> its evidence file
    tasks: bytes  # the task set the records' answers are judged by
    # track (stable, canary) -> the developer whose key scripts/gate sends that track's requests
    # with: the stable one in the general ring, the canary one in the pilot ring.
    keys: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class VllmFleet:
    kubeconfig: Kubeconfig
    namespace: str
    image: str  # the repository, e.g. vllm/vllm-openai
    stable: ServingPair
    previous: ServingPair | None  # the stable pair before the last promotion: the rollback target
    canary: Canary | None
    replicas: int
    vllm: Vllm  # the stable pair's serve settings; a canary's differ only in model and revision
    cache_salt: str  # one of CACHE_SALT_SCOPES
    model_cache: ModelCache
    agent_sandbox: AgentSandbox | None
    alerts: Alerts
    gate: RolloutGate | None  # None: the stack declares no gate, so no promotion passes
    # (stable, previous) pair keys as the stack's last update left them; None before the first.
    deployed: tuple[tuple[str, str, str], tuple[str, str, str] | None] | None
    # Each track's Service at a fixed cluster IP (track -> IP), so the gateway's routes to the
    # fleet are known at preview; {}: Kubernetes picks them, and the gateway cannot route there.
    service_ips: dict[str, str] = field(default_factory=dict)
    # Who reaches the vLLM pods' port besides the in-cluster gateway's pods and an operator's
    # Prometheus: addresses outside the pods (a gateway host's, the node's for a Prometheus on
    # its network), as the pods see them.
    ingress_from: tuple[str, ...] = ()
    # The in-cluster gateway's pods (namespace, labels), from `gateway` (config/schema).
    gateway_pods: tuple[str, tuple[tuple[str, str], ...]] | None = None
    memory_floor: MemoryFloor | None = None  # None: the stack declares no model facts
    prometheus: Prometheus = Prometheus(mode="none", scrape_interval_seconds=30)

    @property
    def gate_records(self) -> tuple[GateRecord, ...]:
        return self.gate.records if self.gate else ()

    def image_ref(self, pair: ServingPair) -> str:
        return f"{self.image}:{pair.tag}" + (f"@{pair.digest}" if pair.digest else "")

    def serve(self, pair: ServingPair) -> Vllm:
        """The serve settings of one pair (its model and revision, the fleet's other settings)."""
        return dataclasses.replace(self.vllm, model=pair.model, revision=pair.revision)
