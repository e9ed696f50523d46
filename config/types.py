"""The typed stack configuration: frozen dataclasses that `config.schema.parse` returns, each
field that is a stack key declared where it is typed (config/options.py::opt: its kind, one-line
doc and default); what a section derives (a name, a login key, a reference resolved) is a plain
field.

Plain values only: secrets arrive as their text here and become Pulumi secrets in
`config.load`, the one module that imports Pulumi. A type of more than three fields is built
with keywords only (kw_only), so a field added or moved cannot shift values into its neighbours.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from config.checker import (API_URL_TEXT, Checker, DNS_LABEL, DNS_LABEL_TEXT, FILE_NAME, FILE_NAME_TEXT,
                            absolute_dir, api_url, ip_address, relative_subdir)
from config.options import PORT as PORT_KIND
from config.options import (BOOL, COMMIT, HF_REPO, HOST_KEY, REVISION, RUNTIME_DIR, SERVED_NAME, HOSTNAME_KIND, LOCATION, SHA256, USER_KIND,
                            USD, NAME_KIND, Choice, Either, Int, Kind, Labels, ListOf, Named,
                            Number, Obj, Opt, OrNone, Raw, Text, Typed, opt, pattern,
                            stack_key)
from spear.harness import HARNESSES
from spear.seats import IMAGE_DIGEST_TEXT, image_digest_problem
from spear.rollout_gate import Policy as GatePolicy
from spear.rollout_gate import Record as GateRecord
from spear.rollout_gate import Refused as RefusedRecord
from spear.rollout_gate import ServedWith
from spear.rules import (BACKUP_DUMP, BACKUP_DUMP_TEXT, BUDGET_DURATION, BUDGET_DURATION_TEXT,
                         DEFAULT_PRIORITY_CLASS, EGRESS_NETWORK_TEXT, FLEET_UPSTREAM, GENERAL_RING, IMAGE,
                         IMAGE_DIGEST, IMAGE_TAG, PREFIX_AFFINITY, PRIORITY_CLASSES, RINGS,
                         SERVICE_SPREAD, egress_network_problem,
                         image_pin_problem, is_loopback)
from spear.vllm import BYTES_PER_PARAMETER, GPU_MEMORY_UTILIZATION, TOOL_CALL_PARSER

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
    host: str = opt(HOSTNAME_KIND, "where spear-fleet logs in")
    port: int = opt(PORT_KIND, "its sshd's port", default=22)
    user: str = opt(USER_KIND, "who logs in", default="root")
    # ssh.privateKeyPath or sshPrivateKeys.<name> (config/schema/common.py)
    key: InlineKey | KeyFile = stack_key("privateKeyPath")
    # The host key it must present (`<type> <base64>`); None: recorded at first contact, or
    # known_hosts' (components/hostops/known_hosts.py).
    host_key: str | None = opt(HOST_KEY, "the host key it must present (else recorded at first"
                               " contact)", default=None)

    @property
    def is_loopback(self) -> bool:
        """True when the host is this machine (its ports share this machine's port space)."""
        return is_loopback(self.host)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class GitSource:
    url: str = opt(pattern(re.compile(r"[^\s-]\S*"), "a git URL or path"),
                   "llama.cpp's repository (no whitespace, not an option to git)", key="git")
    commit: str = opt(COMMIT, "the commit built")


@dataclass(frozen=True)
class ArchiveSource:
    archive: str = opt(LOCATION, "a source archive: a local path (~ expanded) or http(s) URL")
    sha256: str = opt(SHA256, "the archive's digest")
    subdir: str = opt(Text(relative_subdir, "a relative path inside the archive, without '..'"),
                      "the llama.cpp tree inside it, . for its root", default=".")


@dataclass(frozen=True, kw_only=True)
class LlamaCpp:
    source: GitSource | ArchiveSource = opt(
        Either({"git": Typed(GitSource), "archive": Typed(ArchiveSource)},
               "either {git, commit} or {archive, sha256, subdir}"),
        "where llama.cpp's source comes from")
    profile: str = opt(Choice(tuple(PROFILE_CMAKE_FLAGS)), "the build profile")
    extra_cmake_flags: tuple[str, ...] = opt(
        ListOf(pattern(re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=\S*"),
                       "a -DNAME=value (or -DNAME:TYPE=value) string"),
               "a list of -DNAME=value strings"), "cmake flags after the profile's (a later -D"
        " wins)", default=())

    @property
    def cmake_flags(self) -> tuple[str, ...]:
        """The profile's flags, then the stack's extra ones (cmake lets a later -D win)."""
        return PROFILE_CMAKE_FLAGS[self.profile] + self.extra_cmake_flags


@dataclass(frozen=True, kw_only=True)
class Shard:
    name: str = opt(pattern(FILE_NAME, FILE_NAME_TEXT), "its file name under"
                    " <runtime>/models/gguf/")
    size: int = opt(Int(1), "its size in bytes", why="required: the file size in bytes")
    sha256: str = opt(SHA256, "its digest")
    source: str | None = opt(LOCATION, "where it is fetched from; left out: already on the host",
                             default=None)


@dataclass(frozen=True, kw_only=True)
class Model:
    arch: str = opt(pattern(re.compile(r"[a-z0-9_]+"), "a llama.cpp architecture name"
                            " ([a-z0-9_]+, e.g. qwen3next, llama)"),
                    "llama.cpp's architecture name, the prefix of its GGUF keys")
    native_ctx: int = opt(Int(1), "the context length the model was trained at",
                          why="required: the context length it was trained at")
    moe: bool = opt(BOOL, "a mixture-of-experts model", default=False)
    shards: tuple[Shard, ...] = opt(ListOf(Typed(Shard), "a non-empty list of {name, size,"
                                           " sha256, source?}", non_empty=True),
                                    "the GGUF files, in order")
    # A file name under <runtime>/models/lora/; None (or "none" in the stack): the base model.
    adapter: str | None = opt(OrNone(pattern(FILE_NAME, FILE_NAME_TEXT + " under"
                                             " <runtime>/models/lora/, or none for the base"
                                             " model")), "a LoRA adapter, or none", default=None)


@dataclass(frozen=True, kw_only=True)
class Server:
    ctx_size: int = opt(Int(1), "the context window llama-server allocates",
                        why="no default: state it in the stack")
    host: str = opt(Text(ip_address, "an IP address"), "where it listens", default="127.0.0.1")
    port: int = opt(PORT_KIND, "its port on the host", default=8080)
    threads: int | None = opt(Int(1), "CPU threads (left out: llama-server's default)",
                              default=None)
    gpu_layers: int | None = opt(Int(0), "layers on the GPU (left out: llama-server's default)",
                                 default=None)
    # MoE layers kept on the CPU; None: serve.sh's default for MoE models.
    cpu_moe: int | None = opt(Int(0), "MoE layers kept on the CPU (only with model.moe)",
                              default=None)
    parallel: int = opt(Int(1), "requests served at once", default=1)


@dataclass(frozen=True, kw_only=True)
class InferenceHost:
    name: str  # the key in inferenceHosts; names its resources
    ssh: SshTarget  # its stack key declared in config/schema/hosts.py (with the login's key)
    runtime_dir: str = opt(RUNTIME_DIR, "spear-fleet's folder on the host", default="/opt/spear")
    backend: Backend  # the client backend that reaches this server (a PORT backend), by name
    llama_cpp: LlamaCpp = opt(Typed(LlamaCpp), "the llama.cpp build")
    model: Model = opt(Typed(Model), "the model it serves")
    server: Server = opt(Typed(Server), "llama-server's settings")


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
    """What `vllm serve` is told (spear/vllm.py renders the command line from it); declared as
    a pod's `vllm` (the fleet's take the same keys at its top level)."""
    model: str = opt(HF_REPO, "the Hugging Face repository served")
    revision: str = opt(REVISION, "its commit (never a branch)")
    served_model_name: str = opt(SERVED_NAME, "the name vLLM serves it under")
    tensor_parallel_size: int = opt(Int(1), "GPUs the model is split over", default=1)
    max_model_len: int = opt(Int(1), "the context window", why="no default: state it in the stack")
    port: int = opt(PORT_KIND, "vLLM's port", default=8000)
    gpu_memory_utilization: str = GPU_MEMORY_UTILIZATION  # as vLLM is given it, e.g. "0.90"
    scheduling_priority: bool = False  # --scheduling-policy priority (the gateway stamps priorities)
    tool_call_parser: str = TOOL_CALL_PARSER  # a name spear/vllm.py's table gives the engine


@dataclass(frozen=True, kw_only=True)
class PodSsh:
    """How spear-fleet logs in to the pod; the address is RunPod's to give (read from its API)."""
    user: str = opt(USER_KIND, "who logs in", default="root")
    key: InlineKey | KeyFile = stack_key("privateKeyPath")  # or sshPrivateKeys.<name>


_POD_PORT = re.compile(r"(?P<port>[0-9]{1,5})/(tcp|http)")
POD_PORTS_TEXT = ("a list of '<port>/tcp' or '<port>/http' (port 1-65535), each once, with"
                  " 22/tcp")
GPU_TYPES_TEXT = "a non-empty list of RunPod GPU type ids (e.g. NVIDIA H100 80GB HBM3), each once"


@dataclass(frozen=True, kw_only=True)
class RunPodPod:
    name: str  # the key in runpod.pods; names its resources
    api_url: str  # RunPod's REST API v1, without a trailing slash
    gpu_type_ids: tuple[str, ...] = opt(
        ListOf(pattern(re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]*"), "a RunPod GPU type id"),
               GPU_TYPES_TEXT, non_empty=True), "the GPU types RunPod may place the pod on")
    gpu_count: int = opt(Int(1), "GPUs per pod", default=1)
    image_name: str = opt(Text(lambda v: None if image_pin_problem(v) else v,
                               "an image with a version tag or an @sha256 digest (not :latest,"
                               " and not untagged: the engine version is part of the pin, seed"
                               " 001 'Maintenance')"), "vLLM's image, pinned")
    container_disk_in_gb: int = opt(Int(1), "the container disk",
                                    why="required: the image and vLLM need room")
    volume_in_gb: int = opt(Int(0), "the volume the weights are kept on",
                            why="required: the weights are kept on the volume")
    cloud_type: str = opt(Choice(CLOUD_TYPES), "RunPod's cloud", default="SECURE")
    # Always with 22/tcp: spear-fleet logs in through it.
    ports: tuple[str, ...] = opt(
        ListOf(Text(lambda v: v if (m := _POD_PORT.fullmatch(v)) and 1 <= int(m["port"]) <= 65535
                    else None, "'<port>/tcp' or '<port>/http', port 1-65535"), POD_PORTS_TEXT),
        "the pod's exposed ports", default=("22/tcp",))
    backend: Backend  # the client backend that reaches vLLM through the SSH tunnel, by name
    ssh: PodSsh
    vllm: Vllm = opt(Typed(Vllm), "what `vllm serve` is told")


# --------------------------------------------------------------------------------------------
# REDS endpoints (seed 000 §6.2.7: the `reds` backend). The REDS host is a stable host:
# spear-fleet installs nothing there; it opens the tunnel and checks that something answers.


@dataclass(frozen=True, kw_only=True)
class RedsSsh:
    """How spear-fleet logs in to a REDS host. What the stack leaves out comes from the host's
    entry in ~/.ssh/config when the connection is made (an alias is preferred: it already holds
    the user, key and auth quirks), and otherwise port 22 and user root."""
    host: str = opt(HOSTNAME_KIND, "the REDS host (an ~/.ssh/config alias is preferred)")
    port: int | None = opt(PORT_KIND, "its sshd's port (left out: ~/.ssh/config's Port, else 22)",
                           default=None)
    user: str | None = opt(USER_KIND, "who logs in (left out: ~/.ssh/config's, else root)",
                           default=None)
    # Its privateKeyPath or sshPrivateKeys.<name>; None: the alias's IdentityFile.
    key: InlineKey | KeyFile | None = stack_key("privateKeyPath")
    host_key: str | None = opt(HOST_KEY, "the host key it must present", default=None)


@dataclass(frozen=True, kw_only=True)
class RedsEndpoint:
    name: str  # the key in redsEndpoints; names its resources
    inference_host: str | None  # a name in inferenceHosts when this stack manages the server
    ssh: RedsSsh  # the stack's `ssh`, or the managed inference host's own login
    address: str  # where the server listens on the host
    port: int  # the server's port on the host (SPEAR_SERVER_PORT there)
    # An id as /v1/models lists it (a name, a Hugging Face id, a model path): one printable word.
    model_id: str | None = opt(pattern(re.compile(r"[!-~]{1,256}"), "a model id as /v1/models"
                                       " lists it (printable characters, no spaces; at most"
                                       " 256)"), "the id it must advertise (left out: the first"
                               " /v1/models lists)", default=None)
    backend: Backend  # the client backend whose SSH tunnel reaches it (a PORT backend)

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


# A systemd calendar expression's characters; the gateway host's systemd checks the rest.
_CALENDAR = re.compile(r"[A-Za-z0-9*:,./~ -]{1,100}")
# A cron schedule's five fields (Kubernetes checks the rest).
_CRON = re.compile(r"(@(hourly|daily|weekly|monthly|yearly))|([0-9*/,-]+( [0-9*/,-]+){4})")
_KEEP = Int(1, 365)


@dataclass(frozen=True)
class DatabaseBackupPlan:
    """gateway.database.backup: pg_dump of the local database by a timer on the gateway host."""
    folder: str = opt(Text(absolute_dir, "an absolute folder on the gateway host that outlives"
                           " it (a mounted volume)"), "where the dumps go")
    on_calendar: str = opt(pattern(_CALENDAR, "a systemd calendar expression, e.g. daily or"
                                   " *-*-* 03:00:00"), "when", default="daily")
    keep: int = opt(_KEEP, "the newest dumps kept", default=7)


@dataclass(frozen=True, kw_only=True)
class ClusterBackupPlan:
    """gateway.database.backup with gateway.kubernetes: pg_dump of the external database by a
    CronJob in the gateway's namespace, into a volume that outlives the gateway."""
    schedule: str = opt(pattern(_CRON, "a cron schedule, e.g. \"0 3 * * *\" or @daily"), "when",
                        default="0 3 * * *")
    keep: int = opt(_KEEP, "the newest dumps kept", default=7)
    # One of the two (config/schema/gateway.py).
    host_path: str | None = opt(Text(absolute_dir, "an absolute folder on the node, writable by"
                                     " user 1000 (a one-node cluster)"),
                                "a folder on the node (a one-node cluster, the local one)",
                                default=None)
    claim: str | None = opt(pattern(re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"),
                                    "a PersistentVolumeClaim's name in the gateway's namespace"),
                            "or a PersistentVolumeClaim of the namespace that the operator"
                            " provides", default=None)


@dataclass(frozen=True, kw_only=True)
class GatewayDatabase:
    location: str  # one of DATABASE_LOCATIONS; its default is the placement's
    port: int = opt(PORT_KIND, "the local cluster's port on the gateway host", default=5432)
    query_engine: str = opt(Choice(QUERY_ENGINES), "Prisma's engine: native (downloaded at first"
                            " use) or offline (WebAssembly from npm)", default=OFFLINE_ENGINE)
    # On a gateway host (the local database); in the cluster (the external database) a CronJob.
    backup: DatabaseBackupPlan | ClusterBackupPlan | None = None
    restore_from: str | None = opt(pattern(BACKUP_DUMP, BACKUP_DUMP_TEXT), "a dump of the"
                                   " backups, loaded into a database made anew", default=None)


@dataclass(frozen=True)
class Pricing:
    """What a fleet token costs a developer's budget (an internal charge: the fleet's GPUs are
    paid either way, and budgets need a price to hold)."""
    input_usd_per_token: float
    output_usd_per_token: float


@dataclass(frozen=True, kw_only=True)
class Hatch:
    """The frontier escape hatch: `frontier`, used only when the fleet answered 429/5xx."""
    model: str = opt(pattern(re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}"), "the frontier"
                             " provider's model id (e.g. claude-sonnet-4-5)"),
                     "the provider's model id")
    api_base: str = opt(Text(api_url, API_URL_TEXT), "the provider's API",
                        default="https://api.anthropic.com")
    monthly_cap_usd: float = opt(USD, "hard: over it, escalations are refused")
    alert_usd: float = opt(USD, "the spend alert, below the cap")
    pricing: Pricing  # what the provider charges: the cap is counted with it


MIN_GATEWAY_REPLICAS = 2  # one replica is the single gateway the cluster placement is there to avoid
NODE_PORTS = (30000, 32767)  # Kubernetes' default --service-node-port-range


@dataclass(frozen=True, kw_only=True)
class GatewayCluster:
    """The gateway as a Deployment in the fleet's cluster instead of on a host (the cookbook: it
    "is stateless apart from Postgres and scales horizontally"): its replicas share one
    external PostgreSQL, and the budgets hold across them (the ledger is in that database)."""
    namespace: str = opt(pattern(DNS_LABEL, DNS_LABEL_TEXT), "the gateway's namespace",
                         default="spear-gateway")
    replicas: int = opt(Int(MIN_GATEWAY_REPLICAS, 50), "replicas sharing one external PostgreSQL",
                        default=MIN_GATEWAY_REPLICAS)
    image: str = opt(Text(lambda v: None if image_pin_problem(v) else v,
                          "an image that pins LiteLLM: a version tag (not latest) or an @sha256"
                          " digest, holding litellm.version's LiteLLM, python3, bash and psql"),
                     "the gateway's image, pinned")
    # Where localhosts/images/gateway_image puts it (bin/litellm, litellm_proxy_extras' migrations).
    venv: str = opt(Text(absolute_dir, "the absolute path of the image's LiteLLM virtualenv"),
                    "the image's LiteLLM virtualenv", default="/opt/litellm/venv")
    service_ip: str | None = opt(Text(ip_address, "an IP address in the cluster's Service range"),
                                 "the gateway Service's fixed cluster IP (required with agent"
                                 " seats)", default=None, key="serviceIP")
    tls: GatewayTls | None = None  # None: plain HTTP (no agent seat may then reach it)
    node_port: int | None = opt(Int(*NODE_PORTS), "where developers outside the cluster reach it"
                                " (with tls)", default=None)


@dataclass(frozen=True)
class GatewayTls:
    """gateway.kubernetes.tls or gateway.listen.tls: the gateway serves HTTPS under `name` with
    the stack's certificate (gatewayTlsCertificate, gatewayTlsKey: secrets), and its clients
    trust `root_pem`."""
    name: str  # the DNS name in the certificate, which seats resolve to the gateway's address
    root_pem: str  # the bundle's self-signed root (public)


@dataclass(frozen=True, kw_only=True)
class TlsListener:
    """gateway.listen.tls: the gateway host's HTTPS listener beside its loopback HTTP, on an
    address seats and developers reach (never loopback)."""
    address: str = opt(Text(lambda v: v if ip_address(v) and not is_loopback(v) else None,
                            "an IP address of the gateway host other than loopback, which the"
                            " seats' pods and developers reach (loopback is gateway.listen.host)"),
                       "where HTTPS listens")
    port: int = opt(PORT_KIND, "its port", default=4443)
    tls: GatewayTls


@dataclass(frozen=True, kw_only=True)
class Gateway:
    name: str = opt(NAME_KIND, "names its resources (and its sshPrivateKeys entry)",
                    default="gateway")
    ssh: SshTarget | None  # None: the gateway runs in the cluster (kubernetes)
    kubernetes: GatewayCluster | None = None
    runtime_dir: str = opt(RUNTIME_DIR, "its folder on the gateway host",
                           default="/opt/spear-gateway")
    # From `listen` (config/schema/gateway.py): where the proxy listens on the gateway host, and
    # its HTTPS beyond loopback.
    host: str = stack_key("listen")
    port: int
    tls_listener: TlsListener | None = None
    litellm_version: str = stack_key("litellm")  # and the packages it is installed from
    packages: PackageSource
    database: GatewayDatabase
    # From `coder`: the endpoint names it routes to (hosts, pods, REDS endpoints), retries,
    # timeout (seconds) and price.
    upstreams: tuple[str, ...] = stack_key("coder")
    num_retries: int
    request_timeout: int
    pricing: Pricing
    hatch: Hatch
    fleet_routing: str = SERVICE_SPREAD  # coder.fleetRouting, its default the placement's

    @property
    def placement(self) -> str:
        """Where it runs: `host` (a gateway host, gateway.ssh) or `kubernetes` (the fleet's
        cluster, gateway.kubernetes); components/gateway/__init__.py has one of each."""
        return "host" if self.kubernetes is None else "kubernetes"

    @property
    def routes_fleet(self) -> bool:
        """`coder` reaches the vLLM fleet's tracks (coder.upstreams names vllmFleet)."""
        return FLEET_UPSTREAM in self.upstreams

    @property
    def picks_fleet_pods(self) -> bool:
        """It picks each request's pod itself (prefix affinity), so it lists the tracks' pods."""
        return self.routes_fleet and self.fleet_routing == PREFIX_AFFINITY


# --------------------------------------------------------------------------------------------
# Developers (seed 001 step 5, "Budget hygiene"): one virtual key each, with a budget that resets


_LIMIT = Int(1)


@dataclass(frozen=True, kw_only=True)
class Developer:
    name: str  # the key in developers; the key's alias and metadata.developer
    team: str | None = opt(NAME_KIND, "the team the key belongs to (LiteLLM's team)", default=None)
    # These three are judged by spear/rules.py::developer_key_problems (config/schema/developers).
    models: tuple[str, ...]  # gateway model names the key may use
    max_budget: float  # USD per budget window
    budget_duration: str  # LiteLLM's window: "30d", "1mo", ...
    tpm_limit: int | None = opt(_LIMIT, "tokens per minute", default=None)
    rpm_limit: int | None = opt(_LIMIT, "requests per minute", default=None)
    max_parallel_requests: int | None = opt(_LIMIT, "requests in flight at once", default=None)
    metadata: dict[str, str] = opt(Labels(), "the key's metadata (one-line strings)", default={})
    rotation: int = opt(Int(0), "bump to rotate the key (/key/regenerate); the old one lives the"
                        " grace period", default=0)
    rotation_grace: str = opt(pattern(BUDGET_DURATION, BUDGET_DURATION_TEXT),
                              "how long a rotated-out key still works", default="24h",
                              key="rotationGracePeriod")
    # What the gateway stamps on the key's requests (its metadata; spear_gateway/tenancy.py):
    ring: str = opt(Choice(RINGS), "pilot: served by the fleet's canary while one is up",
                    default=GENERAL_RING)
    priority: str = opt(Choice(tuple(PRIORITY_CLASSES)), "the vLLM priority the gateway stamps"
                        " (interactive 0, background 10: agent loops yield to people)",
                        default=DEFAULT_PRIORITY_CLASS)

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


DEFAULT_VLLM_IMAGE = "vllm/vllm-openai"


def _repository(value: str) -> str | None:
    match = IMAGE.fullmatch(value)
    return value if match and not match["tag"] and not match["digest"] else None


def _engine_tag(value: str) -> str | None:
    # The tag pins the engine by itself, digest or not: the tool-parser table reads its version.
    pinned = IMAGE_TAG.fullmatch(value) and image_pin_problem(f"{DEFAULT_VLLM_IMAGE}:{value}") is None
    return value if pinned else None


@dataclass(frozen=True, kw_only=True)
class ServingPair:
    """What a rollout moves together: the engine (image tag, optionally its digest) and the
    model revision (seed 001 "How to maintain it": the previous pair stays deployable)."""
    tag: str = opt(Text(_engine_tag, "an image tag naming the engine version, e.g. v0.24.0 (not"
                        " latest: it moves)"), "the image tag: the engine version")
    digest: str | None = opt(pattern(IMAGE_DIGEST, "sha256:<64 lowercase hex> (the image's"
                                     " digest)"), "the image's digest", default=None)
    model: str = opt(HF_REPO, "the Hugging Face repository served")
    revision: str = opt(REVISION, "its commit (never a branch)")

    @property
    def key(self) -> tuple[str, str, str]:
        """What a gate record must pin exactly (spear/rollout_gate.py's Pair)."""
        return (self.tag, self.model, self.revision)


@dataclass(frozen=True)
class Canary:
    pair: ServingPair
    replicas: int


def _network(value: str) -> str | None:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError:
        return None


@dataclass(frozen=True)
class EgressNetwork(Kind):
    """An IP network a NetworkPolicy may name (spear/rules.py::egress_network_problem)."""
    allowed: str

    def read(self, check: Checker, key: str, value: Any) -> str | None:
        cidr = Text(_network, self.allowed).read(check, key, value)
        if cidr is not None and egress_network_problem(cidr):
            check.fail(key, cidr, EGRESS_NETWORK_TEXT)
            return None
        return cidr

    def schema(self) -> dict:
        return {"type": "string"}


@dataclass(frozen=True)
class EgressTarget:
    name: str
    # An IP network, normalised; None for the in-cluster gateway's pods.
    cidr: str | None = opt(EgressNetwork("an IP network, e.g. 10.0.0.5/32 (a NetworkPolicy allows"
                                         " addresses, not names)"), "the mirror's address")
    ports: tuple[int, ...] = opt(ListOf(PORT_KIND, "a non-empty list of TCP ports", non_empty=True),
                                 "its TCP ports")
    # The in-cluster gateway: its namespace and its pods' labels (spear/rules.py::pods_peer).
    pods: tuple[str, tuple[tuple[str, str], ...]] | None = None


QUANTITY = re.compile(r"[1-9][0-9]*(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


@dataclass(frozen=True, kw_only=True)
class Seat:
    """One agent seat (seed 001 step 7): a developer's harness in a sandboxed pod of the agent
    namespace, with that developer's virtual key as its only credential."""
    name: str  # the key in agentSandbox.seats; names its objects (seat-<name>)
    # A developer of the stack: whose key the seat holds (config/schema/vllm_fleet.py).
    developer: str = opt(Raw({"type": "string"}), "whose virtual key the seat holds (a developer)")
    harness: str = opt(Choice(HARNESSES), "the coding harness it runs")
    workspace_size: str = opt(pattern(QUANTITY, "a Kubernetes quantity, e.g. 10Gi (the working"
                                      " copy's limit)"), "the working copy's emptyDir limit",
                              default="10Gi")


@dataclass(frozen=True)
class PinnedImage(Kind):
    """An image pinned by digest (spear/seats.py): the reference, or `{file: <path>}`, a file
    holding it, which the machine that built and loaded the image wrote (the local stack's:
    localhosts/images/<builder>.py; a digest differs from one machine's build to the next, so no
    stack file can hold it). config/load.py reads the file."""
    builder: str

    allowed = IMAGE_DIGEST_TEXT

    def read(self, check: Checker, key: str, value: Any) -> str | None:
        if isinstance(value, Mapping):
            form = _IMAGE_FILE.read(check, key, value)
            path = form and form["file"]
            if not path:
                return None
            value = check.files.get(path, "not read")
            if not isinstance(value, bytes):
                check.report(f"{key}.file", f"{path}: {value}", "a file holding the"
                             f" image's pinned reference (localhosts/images/{self.builder}.py"
                             " writes the local stack's: run scripts/up-local)")
                return None
            value, key = value.decode().strip(), f"{key}.file ({path})"
        problem = image_digest_problem(value)
        if problem:
            check.fail(key, value, f"{IMAGE_DIGEST_TEXT}: {problem}")
            return None
        return value

    def schema(self) -> dict:
        return {"anyOf": [{"type": "string"}, _IMAGE_FILE.schema()]}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        if isinstance(value, Mapping) and isinstance(value.get("file"), str) and value["file"]:
            yield value["file"], False


_IMAGE_FILE = Obj({"file": Opt(Text(lambda v: v or None, "the path of a file holding the pinned"
                                    " reference"), "a file the image's builder wrote")})
# An API server other than the cluster's `kubernetes` Service, for a pod on the node's network of
# a cluster whose API server advertises a loopback address (the local one).
API_SERVER_TEXT = "the API server's https URL, e.g. https://127.0.0.1:6440"
API_SERVER = Text(lambda v: v if v.startswith("https://") and api_url(v) else None, API_SERVER_TEXT)


@dataclass(frozen=True, kw_only=True)
class AgentSandbox:
    namespace: str = opt(pattern(DNS_LABEL, DNS_LABEL_TEXT), "the agent namespace",
                         default="agents")
    # Taken from `gateway` (config/schema/across.py): None without one a pod can reach.
    gateway: EgressTarget | None
    mirrors: tuple[EgressTarget, ...]
    seat_image: str | None = opt(PinnedImage("seat_image"), "the harnesses' image, by digest"
                                 " (required with seats)", default=None)
    seats: dict[str, Seat] = field(default_factory=dict)  # by name; {} when none is declared
    # Whose key each seated harness's dialect check asks with (required with seats).
    dialect_check_developer: str | None = opt(Raw({"type": "string"}), "whose key runs each"
                                              " seated harness's dialect check (required with"
                                              " seats)", default=None)
    node_guard: NodeGuard | None = None  # required with seats
    # The RuntimeClass every workload of the namespace runs with (a sandbox runtime: gVisor's);
    # None: the node's default runtime.
    runtime_class: str | None = opt(pattern(SUBDOMAIN, "a RuntimeClass name (a DNS subdomain,"
                                            " e.g. gvisor)"), "the namespace's RuntimeClass (a"
                                    " sandbox runtime)", default=None)


@dataclass(frozen=True, kw_only=True)
class NodeGuard:
    """What keeps seats off their node: a DaemonSet filtering their traffic in its nftables."""
    image: str = opt(PinnedImage("node_guard_image"), "python3 and nft, by digest")
    api_server: str | None = opt(API_SERVER, "the API server (left out: the cluster's Service)",
                                 default=None)


@dataclass(frozen=True, kw_only=True)
class ModelCache:
    size: str = opt(pattern(QUANTITY, "a Kubernetes quantity, e.g. 200Gi (room for the weights)"),
                    "room for the weights")
    storage_class: str | None = opt(pattern(SUBDOMAIN, "a storage class name"), "left out: the"
                                    " cluster's default", default=None)
    access_mode: str = opt(Choice(ACCESS_MODES), "the volume's access mode",
                           default="ReadWriteMany")
    # A static volume on the node (clusters without a provisioner).
    host_path: str | None = opt(Text(lambda v: v if v.startswith("/") and v != "/"
                                     and "\n" not in v else None,
                                     "an absolute path on the node other than /"),
                                "a static volume on the node (a cluster without a provisioner)",
                                default=None)


_SECONDS = Number(0, lo_open=True)
_SHARE = Number(0, 1)


@dataclass(frozen=True, kw_only=True)
class Alerts:
    preemptions_per_hour: int = opt(Int(0), "preemptions per hour that alert", default=30)
    ttft_p95_seconds: float = opt(_SECONDS, "time to first token, p95", default=2.0)
    itl_p95_seconds: float = opt(_SECONDS, "inter-token latency, p95 (the other latency SLO)",
                                 default=0.1)
    prefix_cache_hit_rate_min: float = opt(_SHARE, "the prefix cache's least hit rate",
                                           default=0.3)
    hatch_escalations_per_hour: int = opt(Int(1), "escalations to the hatch per hour",
                                          default=20)
    # The hatch's spend alert and cap are gateway.hatch's (declared once, with the gateway).
    # A track's prefill or decode tokens/s below this share of its last measurement fails the
    # `up` after a pair change (components/vllm_fleet/throughput.py); None: only recorded.
    throughput_min_ratio: float | None = opt(Number(0, 1, lo_open=True), "a track's least share"
                                             " of its last measured tokens/s after a pair change",
                                             default=None)


# Who evaluates the alert rules and scrapes the fleet and the gateway: nobody the stack runs (the
# rules and the dashboard are ConfigMaps for a Prometheus of your own), a Prometheus the stack
# runs in the cluster, or the Prometheus Operator's objects (PrometheusRule, PodMonitor,
# ScrapeConfig) for a cluster that runs the Operator.
PROMETHEUS_MODES = ("none", "bundled", "operator")
# A Kubernetes label: an optional DNS prefix and a name (63 at most, alphanumeric at each end).
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}"
                        r"[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


@dataclass(frozen=True, kw_only=True)
class Prometheus:
    mode: str = opt(Choice(PROMETHEUS_MODES), "who evaluates the rules and scrapes")
    scrape_interval_seconds: int = opt(Int(1, 300), "scrapes and rule evaluations", default=30)
    # What each mode takes beside these two: PROMETHEUS_KEYS.
    image: str | None = opt(Text(lambda v: None if image_pin_problem(v) else v,
                                 "a pinned Prometheus image: a version tag (not latest) or an"
                                 " @sha256 digest"), "bundled: the server's image, pinned"
                            " (required)", default=None)
    port: int = opt(PORT_KIND, "bundled: where it listens on the node's network", default=9090)
    retention: str = opt(pattern(re.compile(r"[1-9][0-9]*(h|d|w|y)"), "a duration in hours, days,"
                                 " weeks or years, e.g. 15d"), "bundled: how long it keeps"
                         " samples", default="15d")
    # bundled: the API server its pod discovery asks; None: the cluster's own `kubernetes`
    # Service (a cluster whose API server advertises a loopback address has no endpoint there)
    api_server: str | None = opt(API_SERVER, "bundled: the API server its discovery asks",
                                 default=None)
    # operator: the labels the Operator's ruleSelector and monitor selectors match
    selector_labels: dict[str, str] = opt(
        Labels("a map of Kubernetes labels (name: value) the Operator's selectors match",
               _LABEL_VALUE, _LABEL_KEY), "operator: the labels its selectors match", default={})


PROMETHEUS_KEYS = {"none": (), "bundled": ("image", "port", "retention", "apiServer"),
                   "operator": ("selectorLabels",)}


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """What the memory floor is computed from (the model card's facts, declared by the stack)."""
    parameters_billions: float = opt(Number(0, lo_open=True), "the model's parameters, in"
                                     " billions")
    precision: str = opt(Choice(tuple(BYTES_PER_PARAMETER)), "its weights' precision")
    kv_cache_bytes_per_token: float = opt(Number(0, lo_open=True), "KV cache bytes per token")


@dataclass(frozen=True, kw_only=True)
class MemoryFloor:
    gpu_memory_gib: float = opt(Number(0, lo_open=True), "each GPU's memory",
                                why="each GPU's memory", key="gpuMemoryGiB")
    # By Hugging Face repository id.
    models: dict[str, ModelFacts] = opt(
        Named(Typed(ModelFacts), "model facts", name=re.compile(r".+"),
              map_text="a map of Hugging Face repository id -> {parametersBillions, precision,"
              " kvCacheBytesPerToken}"), "the facts of each pair's model")


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
    # What a promoted pair is served with (LiteLLM's version, the harnesses', the tool registry),
    # which its record must have measured it with; None: the caller did not say (a fleet parsed
    # alone).
    served_with: ServedWith | None = None


@dataclass(frozen=True, kw_only=True)
class VllmFleet:
    kubeconfig: Kubeconfig
    namespace: str = opt(pattern(DNS_LABEL, DNS_LABEL_TEXT), "the fleet's namespace",
                         default="vllm")
    # The repository, e.g. vllm/vllm-openai; each pair's tag (and digest) pins it.
    image: str = opt(Text(_repository, "an image repository without tag or digest (stable.tag"
                          " and stable.digest pin it)"), "the engine's image repository",
                     default=DEFAULT_VLLM_IMAGE)
    stable: ServingPair = opt(Typed(ServingPair), "the pair every ring but pilot is served by")
    # The stable pair before the last promotion: the rollback target.
    previous: ServingPair | None = opt(Typed(ServingPair), "the stable pair before the last"
                                       " promotion: the rollback target", default=None)
    canary: Canary | None  # its pair and replicas, flat in the stack (config/schema/vllm_fleet)
    replicas: int = opt(Int(1), "stable's replicas", default=1)
    vllm: Vllm  # the stable pair's serve settings; a canary's differ only in model and revision
    cache_salt: str  # one of CACHE_SALT_SCOPES (tenancy.cacheSalt)
    model_cache: ModelCache = opt(Typed(ModelCache), "the weights' volume")
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
    ingress_from: tuple[str, ...] = opt(ListOf(EgressNetwork("an IP network, e.g. 10.0.0.5/32"),
                                               f"a list of IP networks ({EGRESS_NETWORK_TEXT})"),
                                        "addresses outside the pods that reach vLLM", default=())
    # The in-cluster gateway's pods (namespace, labels), from `gateway` (config/schema).
    gateway_pods: tuple[str, tuple[tuple[str, str], ...]] | None = None
    # None: the stack declares no model facts.
    memory_floor: MemoryFloor | None = opt(Typed(MemoryFloor), "model facts the memory floor is"
                                           " computed from", default=None)
    prometheus: Prometheus = Prometheus(mode="none", scrape_interval_seconds=30)

    @property
    def gate_records(self) -> tuple[GateRecord, ...]:
        return self.gate.records if self.gate else ()

    def image_ref(self, pair: ServingPair) -> str:
        return f"{self.image}:{pair.tag}" + (f"@{pair.digest}" if pair.digest else "")

    def serve(self, pair: ServingPair) -> Vllm:
        """The serve settings of one pair (its model and revision, the fleet's other settings)."""
        return dataclasses.replace(self.vllm, model=pair.model, revision=pair.revision)
