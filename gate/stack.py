"""What scripts/gate needs from a stack: its rolloutGate policy (read by the config check's own
parser), the records folder, the key the gateway signs receipts with, the canary pair the record pins (as the last `pulumi up` deployed it:
the fleet's `rollout` output, so a canary edited in the config but not yet deployed is never
pinned), the gateway's URL, and the keys of the developers rolloutGate.keys names (from the
stack's `harnesses` output, a secret)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.checker import MISSING, NAMESPACE, Checker, ConfigError, get
from config.load import read_files
from config.schema import vllm_fleet
from config.types import GATEWAY_MASTER_KEY
from gate import GateError
from spear import receipts, rollout_gate, trace
from spear.fleet import CANARY, STABLE
from spear.harness import developer_key


def _pulumi(*args: str) -> Any:
    try:
        done = subprocess.run(["pulumi", *args, "--json"], capture_output=True, text=True)
    except FileNotFoundError:
        raise GateError("pulumi is not on PATH: run `source scripts/env.sh` first") from None
    if done.returncode != 0:
        raise GateError(f"`pulumi {' '.join(args)}` failed: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)


@dataclass(frozen=True)
class GateStack:
    policy: rollout_gate.Policy
    records: Path
    tasks: tuple[rollout_gate.Task, ...]
    arrivals: tuple[trace.Arrival, ...]
    canary: rollout_gate.Pair  # as deployed
    gateway_url: str
    gateway_root: str | None  # the root a TLS gateway's certificate chains to
    gateway_address: str | None  # a gateway host's HTTPS listener, where its name is reached
    keys: dict[str, str]  # track -> the key its requests are sent with
    key_owners: dict[str, str]  # track -> the developer who owns that key

    # What the gateway signs receipts with (from the stack's gatewayMasterKey), so the gate judges
    # its record as the config check will; None when the stack has no master key.
    receipt_key: bytes | None
    installed_version: str | None  # LiteLLM's, as the stack's install read it off the gateway
    harness_versions: dict[str, str]  # harness -> the version the stack pins (harnesses)

    def candidate_pin(self, gateway_version: str | None) -> rollout_gate.Pin:
        """The canary's pair, LiteLLM's version as the gateway reports it live (else as the
        stack's install read it), the harness versions the stack pins, and the tool registry
        this run's validator judges by."""
        version = gateway_version or self.installed_version
        if not version:
            raise GateError("neither the gateway nor the stack's outputs say LiteLLM's version")
        return rollout_gate.Pin(*self.canary, version, tuple(sorted(self.harness_versions.items())),
                                rollout_gate.registry_digest())


def deployed_canary(declared: Any, stack: str) -> rollout_gate.Pair:
    """The canary pair the stack's last update deployed, which must be the one it declares."""
    if declared is MISSING:
        raise GateError("the stack declares no vllmFleet.canary, the pair a record pins: declare"
                        " it (`pulumi config set --path vllmFleet.canary.tag ...`, docs/OPERATING.md"
                        " \"Canary, promote, rollback\") and `pulumi up` first")
    rollout = (_pulumi("stack", "output", "vllm_fleet", "--stack", stack) or {}).get("rollout") or {}
    deployed = rollout_gate.pair_from_json(rollout.get(CANARY))
    wanted = rollout_gate.pair_from_json(declared)
    if deployed != wanted:
        raise GateError(f"vllmFleet.canary declares {rollout_gate.describe(wanted)}, but the last"
                        " `pulumi up` deployed " + (rollout_gate.describe(deployed) if deployed
                                                    else "no canary") + f": `pulumi up --stack {stack}` first")
    return deployed


def load(stack: str) -> GateStack:
    config = _pulumi("config", "--show-secrets", "--stack", stack)
    fleet = (config.get(f"{NAMESPACE}:vllmFleet") or {}).get("objectValue") or {}
    gate = get(fleet, "rolloutGate")
    gate = gate if isinstance(gate, Mapping) else {}
    check = Checker(read_files({"vllmFleet": {"rolloutGate": {"policy": get(gate, "policy")}}}))
    found = vllm_fleet.gate_policy(check, "vllmFleet.rolloutGate.policy", get(gate, "policy"))
    records = get(gate, "records")
    if not isinstance(records, str):
        check.fail("vllmFleet.rolloutGate.records", MISSING, "the records folder (required)")
    try:
        check.raise_if_any()
    except ConfigError as error:
        raise GateError(str(error)) from None
    policy, _, tasks, trace_file = found
    owners = get(gate, "keys")
    owners = dict(owners) if isinstance(owners, Mapping) else {}
    if set(owners) != {STABLE, CANARY}:
        raise GateError("vllmFleet.rolloutGate.keys must name the stable and the canary track's"
                        " developers (a general-ring and a pilot-ring key of the CI's own)")
    gateway = _pulumi("stack", "output", "gateway", "--stack", stack)
    harnesses = _pulumi("stack", "output", "harnesses", "--show-secrets", "--stack", stack)
    try:
        keys = {track: developer_key(harnesses[who])
                for track, who in owners.items()}
    except KeyError as missing:
        raise GateError(f"the stack's harnesses output has no key for {missing}: `pulumi up` first")
    master_key = (config.get(f"{NAMESPACE}:{GATEWAY_MASTER_KEY}") or {}).get("value")
    return GateStack(policy=policy, records=Path(records), tasks=tasks,
                     receipt_key=receipts.receipt_key(master_key) if master_key else None,
                     arrivals=trace.parse(json.loads(trace_file)),
                     canary=deployed_canary(get(fleet, "canary"), stack),
                     gateway_url=gateway["url"].rstrip("/"),
                     gateway_root=(gateway.get("tls") or {}).get("root"),
                     gateway_address=(gateway.get("tls") or {}).get("address"),
                     keys=keys, key_owners=owners,
                     installed_version=gateway.get("litellm_version"),
                     harness_versions=gateway.get("harness_versions") or {})
