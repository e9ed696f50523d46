"""The repository's stack files as the program sees them, for tests without an engine."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import runpy
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pulumi
import yaml

from config.checker import NAMESPACE
from spear.rules import STABLE_RING
from config.load import parse_stack
from config.types import InferenceHost
from localhosts.engine import built_here
from tests.support import tls

REPO = Path(__file__).resolve().parents[2]
DUMMY_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def _config(stack: str) -> dict[str, Any]:
    config = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    prefix = NAMESPACE + ":"
    assert all(key.startswith(prefix) for key in config)
    return {key[len(prefix):]: value for key, value in config.items()}


def _encrypted(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"}


@functools.lru_cache(maxsize=None)  # one pair per name, however many cases ask
def tls_pair(name: str) -> dict[str, str]:
    bundle, key = tls.issue(name)
    return {"gatewayTlsCertificate": bundle, "gatewayTlsKey": key}


def _machine_local(config: dict[str, Any]) -> dict[str, Any]:
    """config with what the machine that runs the stack holds in its place: a TLS pair for the
    gateway's declared name (the secrets' values are the stack's, not needed), and a pinned
    reference where an image setting names the file a build writes (localhosts/engine.py)."""
    gateway = config.get("gateway") or {}
    declared = [(gateway.get(part) or {}).get("tls") for part in ("listen", "kubernetes")]
    names = [t["name"] for t in declared if isinstance(t, dict) and "name" in t]
    pem = tls_pair(names[0]) if names else {}
    config = {key: pem.get(key, value) for key, value in config.items()}
    sandbox = copy.deepcopy((config.get("vllmFleet") or {}).get("agentSandbox") or {})
    built = built_here(sandbox)
    for (*parents, leaf), ref in built.items():
        node = sandbox
        for step in parents:
            node = node[step]
        node[leaf] = ref
    if built:
        config["vllmFleet"] = {**config["vllmFleet"], "agentSandbox": sandbox}
    return config


def stack_raw(stack: str) -> dict[str, Any]:
    """A stack file's config, as the namespace parse_stack() takes (prefix stripped). A top-level secret
    the file holds encrypted (the committed stacks hold throwaway placeholders) reads as
    placeholder text: tests need it set, never its value; the gateway's TLS pair and a seat
    image built here read as _machine_local makes them."""
    # Long enough for the longest a secret must be (gatewayBackupKey's 32 characters).
    return _machine_local({key: f"{key}-PLACEHOLDER-{'0' * 32}" if _encrypted(value) else value
                           for key, value in _config(stack).items()})


def local_inference_hosts() -> dict[str, Any]:
    """The local stack's config with its inference hosts alone: what a test about hosts, endpoints,
    pods or a fleet of its own builds on (the local gateway needs its secrets, and the local
    fleet the local cluster)."""
    return {"inferenceHosts": stack_raw("local")["inferenceHosts"]}


def encrypted_keys(stack: str) -> list[str]:
    """The full keys of the top-level secrets a stack file holds encrypted (to hand the runtime
    as secret keys with stack_raw's placeholders)."""
    return [f"{NAMESPACE}:{key}" for key, value in _config(stack).items() if _encrypted(value)]


def prod_raw() -> dict[str, Any]:
    """prod with its secrets decrypted (placeholders)."""
    return with_placeholder_keys(stack_raw("prod"))


# What prod's encrypted placeholders stand for, for tests without the engine.
PLACEHOLDER_SECRETS = {
    "vllmApiKey": "sk-vllm-PLACEHOLDER",
    "kubeconfig": "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n"
                  "    server: https://k8s.prod.internal:6443\n",
}
FLEET_KEYS = ("vllmFleet", "kubeconfig", "vllmApiKey")


def without_fleet(raw: dict[str, Any]) -> dict[str, Any]:
    """raw without the vLLM fleet and what only it needs (the gateway's route to it, and the
    stable ring, which only the fleet's stable track serves: its keys become general)."""
    kept = {key: value for key, value in raw.items() if key not in FLEET_KEYS}
    if "gateway" in kept:
        coder = kept["gateway"]["coder"]
        kept["gateway"] = {**kept["gateway"], "coder": {
            **coder, "upstreams": [u for u in coder["upstreams"] if u != "vllmFleet"]}}
    if "developers" in kept:
        kept["developers"] = {name: {k: v for k, v in dev.items()
                                     if not (k == "ring" and v == STABLE_RING)}
                              for name, dev in kept["developers"].items()}
    return kept


# prod's one inference host, as a path into its raw config.
PROD_HOST = ("inferenceHosts", "reds")


def with_placeholder_keys(raw: dict[str, Any]) -> dict[str, Any]:
    """raw with DUMMY_KEY for every host that names no key file (the secrets decrypted)."""
    keys = {name: DUMMY_KEY for name, host in raw["inferenceHosts"].items()
            if "privateKeyPath" not in host.get("ssh", {})}
    secrets = {name: text for name, text in PLACEHOLDER_SECRETS.items() if name in raw}
    return {**raw, **secrets, **({"sshPrivateKeys": keys} if keys else {})}


def commented_example(stack: str, key: str) -> Any:
    """The value of a key a stack file shows commented out (`  # spear-fleet:<key>:` and the
    lines under it, each `  #  ...`), as YAML reads it once uncommented."""
    lines = (REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text().splitlines()
    start = lines.index(f"  # spear-fleet:{key}:")
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("  #  "):
            break
        block.append(line)
    return yaml.safe_load("\n".join(line.replace("# ", "", 1) for line in block))[f"{NAMESPACE}:{key}"]


def stack_host(stack: str, **changes: dict[str, Any]) -> InferenceHost:
    """The stack's one inference host as parse_stack() types it; each change merges into a section
    of the host (`host` for the host's own keys, e.g. host={"runtimeDir": "/srv"})."""
    raw = stack_raw(stack)
    [(name, host)] = raw["inferenceHosts"].items()
    for section, values in changes.items():
        if section == "host":
            host.update(values)
        else:
            host[section] = {**host[section], **values}
    return parse_stack(with_placeholder_keys(raw)).inference_hosts[name]


def engine_config(raw: dict[str, Any]) -> dict[str, str]:
    """What the engine hands the program: full keys, objects as JSON text."""
    return {f"spear-fleet:{key}": value if isinstance(value, str) else json.dumps(value)
            for key, value in raw.items()}


# Seed 000 §6.2.1: the command line serve.sh must produce for the prod profile, flag by flag.
SEED_COMMAND_LINE = (
    "llama-server --model /opt/spear/models/gguf/Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf"
    " --ctx-size 524288 --parallel 1 --n-gpu-layers 99 --flash-attn on"
    " --cache-type-k q8_0 --cache-type-v q8_0 --host 127.0.0.1 --port 8010 --jinja --threads 16"
    " --rope-scaling yarn --rope-scale 2 --yarn-orig-ctx 262144"
    " --override-kv qwen3next.context_length=int:524288"
).split()


STACK_REFERENCE = "pulumi:pulumi:StackReference"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
MOCK_TOKEN_B64 = "bW9jay1yb3V0ZXItdG9rZW4="  # base64 of mock-router-token


class RecordingMocks(pulumi.runtime.Mocks):
    """Pulumi mocks that remember every resource registered, by name, in order."""

    def __init__(self, stack_outputs: dict[str, Any] | None = None) -> None:
        self.resources: dict[str, pulumi.runtime.MockResourceArgs] = {}
        self.stack_outputs = stack_outputs or {}  # what a StackReference to the stack reads

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources[args.name] = args
        if args.typ == STACK_REFERENCE:
            return [args.name, {**args.inputs, "outputs": self.stack_outputs,
                                "secretOutputNames": []}]
        if args.inputs.get("type") == SERVICE_ACCOUNT_TOKEN:  # as the token controller fills it
            return [f"{args.name}-id", {**args.inputs, "data": {"token": MOCK_TOKEN_B64}}]
        return [f"{args.name}-id", args.inputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}

    @property
    def registered(self) -> list[str]:
        """Resources registered, by name; the fleet's read of its own stack (config/load.py)
        creates nothing and is left out."""
        return [name for name, args in self.resources.items() if args.typ != STACK_REFERENCE]


def program_mocks(mocks: pulumi.runtime.Mocks, stack: str, monitor: Any = None) -> None:
    """`mocks` for a run of __main__.py. The mocks' root stack is finished when they are set, so
    it takes no async entrypoint (`pulumi.run` raises): the program's only lets the engine's
    registrations start before the SDK waits for them (__main__.py says why), and the mocks
    have no engine, so here it is not registered."""
    pulumi.runtime.set_mocks(mocks, project="spear-fleet", stack=stack, monitor=monitor)
    pulumi.run = lambda program: None


@contextlib.contextmanager
def mocked_stack(raw: dict[str, Any], secret_keys: Sequence[str] = (
                     "spear-fleet:sshPrivateKeys", "spear-fleet:kubeconfig", "spear-fleet:vllmApiKey")
                 ) -> Iterator[RecordingMocks]:
    """Pulumi mocks recording every resource, with `raw` as the `prod` stack's config."""
    mocks = RecordingMocks()
    program_mocks(mocks, "prod")
    pulumi.runtime.set_all_config(engine_config(raw), list(secret_keys))
    try:
        yield mocks
    finally:
        pulumi.runtime.set_all_config({}, [])


@pulumi.runtime.test
def run_main() -> None:
    """The project's program, under the mocks set."""
    runpy.run_path(str(REPO / "__main__.py"))
