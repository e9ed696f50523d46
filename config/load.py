"""Reads the stack's config from the Pulumi runtime: the only module that imports Pulumi's config.

`load()` reads the `spear-fleet` namespace, checks and types it with `config.schema.parse`, and
hands each host's SSH key on as a Pulumi secret, whichever way the stack gave it. Any problem
stops the program before a single resource is registered.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.sync_await import _sync_await

from config.checker import NAMESPACE, ConfigError, Problem, show
from config.schema import OBJECT_KEYS, STACK, TOP_KEYS, parse
from config.types import API_KEY_NAMES, GATEWAY_SECRET_NAMES, FleetConfig, InlineKey, KeyFile
from spear import rollout_gate, rules

# Keys whose whole value must be a Pulumi secret (set with --secret), and how to set each.
SECRET_KEYS = ("sshPrivateKeys", "kubeconfig") + API_KEY_NAMES + GATEWAY_SECRET_NAMES
_SET_SECRET = {"sshPrivateKeys": "pulumi config set --secret --path 'sshPrivateKeys.<name>' < file",
               **{name: f"pulumi config set --secret {name} < file"
                  for name in ("kubeconfig", *API_KEY_NAMES, *GATEWAY_SECRET_NAMES)}}


@dataclass(frozen=True)
class LoadedStack:
    config: FleetConfig
    # inference host, pod or REDS endpoint name -> its key text, secret (none for a REDS endpoint
    # whose key is its ~/.ssh/config alias's IdentityFile)
    ssh_keys: Mapping[str, pulumi.Output[str]]
    api_keys: Mapping[str, pulumi.Output[str]]  # config key (API_KEY_NAMES) -> its text, secret
    # The vLLM fleet's kubeconfig secret (None: a file or the ambient one, or no fleet).
    kubeconfig: pulumi.Output[str] | None = None


class StackConfigError(pulumi.RunError):
    """Every problem, one per line; a RunError, so Pulumi prints it without a traceback."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__(str(ConfigError(*problems)))


def _namespace_keys() -> set[str]:
    """Every key the stack sets in our namespace, so that unknown ones can be refused.

    pulumi.Config cannot list keys; the language host hands the whole config map to
    set_all_config (and mocks set it the same way), with PULUMI_CONFIG as the fallback.
    """
    full_keys = set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.get_config_env())
    prefix = NAMESPACE + ":"
    return {key[len(prefix):] for key in full_keys if key.startswith(prefix)}


def _read_raw() -> dict[str, Any]:
    config = pulumi.Config(NAMESPACE)
    raw: dict[str, Any] = {}
    for key in _namespace_keys() | set(TOP_KEYS):
        if key in OBJECT_KEYS:
            try:
                value = config.get_object(key)
            except pulumi.ConfigTypeError:
                value = config.get(key)  # not JSON: let parse say what an object must look like
        else:
            value = config.get(key)
        if value is not None:
            raw[key] = value
    return raw


def read_files(raw: Mapping[str, Any]) -> dict[str, bytes | str]:
    """What each file the stack names holds (a gate's task set and records, an image's pinned
    reference), by the path it gives: its bytes, or why it cannot be read. Read here so that
    `parse` only checks; a folder gives each file in it, as <folder>/<name>."""
    files: dict[str, bytes | str] = {}
    for path, folder in STACK.files(raw):
        try:
            if not folder:
                files[path] = Path(path).expanduser().read_bytes()
                continue
            for child in sorted(Path(path).iterdir()):
                if child.is_file():
                    files[f"{path}/{child.name}"] = child.read_bytes()
        except OSError as error:
            files[path] = error.strerror or str(error)
    return files


def parse_stack(raw: Mapping[str, Any], deployed: Any = None) -> FleetConfig:
    """`parse` over the files the stack names, read from this project: load() without Pulumi."""
    return parse(raw, deployed, read_files(raw))


def _key_text(owner: str, key: InlineKey | KeyFile, problems: list[Problem]) -> str | None:
    """owner: the config key of what logs in with it (inferenceHosts.<name>, gateway)."""
    if isinstance(key, InlineKey):
        return key.text
    try:
        with open(key.path, encoding="utf-8") as key_file:
            return key_file.read()
    except OSError as error:
        problems.append(Problem(f"{NAMESPACE}:{owner}.ssh.privateKeyPath",
                                show(key.path), f"a readable private key file ({error.strerror})"))
        return None


def deployed_rollout() -> tuple[tuple[str, str, str], tuple[str, str, str] | None] | None:
    """The fleet's (stable, previous) pairs as the stack's last update left them (None before the
    first): its own `vllm_fleet.rollout` output, read back through a StackReference to itself,
    so a promotion is gated against what is deployed, not against the `previous` a change
    declares. Waited for here (as a synchronous invoke is) because the check runs before any
    resource is registered; the reference is a read, which previews show as nothing."""
    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    fleet = _sync_await(pulumi.StackReference(name).get_output_details("vllm_fleet")).value
    rollout = fleet.get("rollout") if isinstance(fleet, Mapping) else None
    if not rollout:
        return None
    # A null output may come back absent.
    return (rollout_gate.pair_from_json(rollout["stable"]),
            rollout_gate.pair_from_json(rollout.get("previous")))


def _passphrase() -> str | None:
    """The passphrase the engine encrypts this stack's secrets with, as it reads it."""
    path = os.environ.get(rules.PASSPHRASE_FILE_ENV)
    if rules.PASSPHRASE_ENV not in os.environ and path:
        try:
            with open(path, encoding="utf-8") as passphrase_file:
                return passphrase_file.read().rstrip("\n")
        except OSError:
            return None  # the engine has already said why it cannot read it
    return os.environ.get(rules.PASSPHRASE_ENV)


def _example_passphrase(problems: list[Problem]) -> None:
    """A stack other than local under the public example passphrase: its `up` is refused before
    any resource is registered; a preview (the committed examples in review) goes on, marked as
    an example."""
    stack = pulumi.get_stack()
    if not rules.example_passphrase_refused(stack, _passphrase()):
        return
    if pulumi.runtime.is_dry_run():
        pulumi.warn(f"example stack: {stack}'s secrets are under the public example passphrase"
                    f" ({rules.PASSPHRASE_ENV}); it can be previewed, never deployed")
    else:
        problems.append(Problem(rules.PASSPHRASE_ENV, "the public example passphrase",
                                f"a passphrase of your own for the {stack} stack (only"
                                f" {rules.EXAMPLE_PASSPHRASE_STACK} may use the example's)"))


def load() -> LoadedStack:
    """Read, check and type the stack config; raise before any resource exists."""
    raw = _read_raw()
    problems: list[Problem] = []
    _example_passphrase(problems)
    problems += [Problem(f"{NAMESPACE}:{key}", "a plain-text value", f"a secret: {_SET_SECRET[key]}")
                for key in SECRET_KEYS
                if key in raw and not pulumi.runtime.is_config_secret(f"{NAMESPACE}:{key}")]
    try:
        cfg: FleetConfig | None = parse_stack(raw, deployed_rollout() if "vllmFleet" in raw
                                              else None)
    except ConfigError as error:
        problems[:0] = error.problems
        cfg = None
    keys: dict[str, str | None] = {}
    if cfg is not None:
        keys = {name: _key_text(f"inferenceHosts.{name}", host.ssh.key, problems)
                for name, host in cfg.inference_hosts.items()}
        keys.update({name: _key_text(f"runpod.pods.{name}", pod.ssh.key, problems)
                     for name, pod in cfg.runpod_pods.items()})
        # A managed host's endpoint logs in with the host's key; one with no key, with the
        # IdentityFile of its ~/.ssh/config alias (read when the connection is made).
        keys.update({name: keys[endpoint.inference_host] if endpoint.inference_host
                     else _key_text(f"redsEndpoints.{name}", endpoint.ssh.key, problems)
                     for name, endpoint in cfg.reds_endpoints.items() if endpoint.ssh.key})
        if cfg.gateway is not None and cfg.gateway.ssh is not None:
            keys[cfg.gateway.name] = _key_text("gateway", cfg.gateway.ssh.key, problems)
    if problems or cfg is None:
        raise StackConfigError(problems)
    fleet = cfg.vllm_fleet
    return LoadedStack(cfg, {name: pulumi.Output.secret(text) for name, text in keys.items()},
                       {name: pulumi.Output.secret(key.text) for name, key in cfg.api_keys.items()},
                       pulumi.Output.secret(fleet.kubeconfig.secret_text)
                       if fleet and fleet.kubeconfig.secret_text else None)
