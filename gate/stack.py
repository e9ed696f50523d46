"""What scripts/gate needs from a stack: its rolloutGate policy (read by the config check's own
parser), the records folder, the canary pair the record pins, and the gateway's URL."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.checker import MISSING, NAMESPACE, Checker, ConfigError, get
from config.schema import vllm_fleet
from gate import trace
from gate.run import GateError
from spear import rollout_gate


def _pulumi(*args: str) -> Any:
    done = subprocess.run(["pulumi", *args, "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise GateError(f"`pulumi {' '.join(args)}` failed: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)


@dataclass(frozen=True)
class GateStack:
    policy: rollout_gate.Policy
    records: Path
    tasks: tuple[rollout_gate.Task, ...]
    arrivals: tuple[trace.Arrival, ...]
    canary: dict[str, str] | None
    gateway_url: str
    ci_key_hint: str = "a gateway key of its own for CI, not a person's"

    def candidate_pin(self, gateway_version: str | None) -> rollout_gate.Pin:
        if self.canary is None:
            raise GateError("the stack declares no vllmFleet.canary: the pair a record pins")
        if gateway_version is None:
            raise GateError("the gateway did not report its LiteLLM version to this key")
        return rollout_gate.Pin(self.canary["tag"], self.canary["model"], self.canary["revision"],
                                gateway_version, ())


def load(stack: str) -> GateStack:
    config = _pulumi("config", "--stack", stack)
    fleet = (config.get(f"{NAMESPACE}:vllmFleet") or {}).get("objectValue") or {}
    check = Checker()
    found = vllm_fleet.gate_policy(check, "vllmFleet.rolloutGate.policy",
                                   get(get(fleet, "rolloutGate") or {}, "policy")
                                   if get(fleet, "rolloutGate") is not MISSING else MISSING)
    records = get(get(fleet, "rolloutGate") or {}, "records") if fleet else MISSING
    if records is MISSING:
        check.fail("vllmFleet.rolloutGate.records", MISSING, "the records folder (required)")
    try:
        check.raise_if_any()
    except ConfigError as error:
        raise GateError(str(error)) from None
    policy, _, tasks, trace_file = found
    gateway = _pulumi("stack", "output", "gateway", "--stack", stack)
    canary = get(fleet, "canary")
    return GateStack(policy=policy, records=Path(records), tasks=tasks,
                     arrivals=trace.parse(json.loads(trace_file)),
                     canary=None if canary is MISSING else dict(canary), gateway_url=gateway["url"])
