"""The rollout gate (seed 001 step 8 and "How to maintain it"): a canary pair is promoted to
stable only on a passing gate result recorded for exactly that pair.

A record is one run of the gate against the live endpoint: the pinned tuple (model revision,
engine version, gateway version, harness versions), the fail-closed tool-call validator's pass
count on live samples, the paired eval's discordant counts b and c with its pre-registered
threshold, and TTFT and inter-token latency under replayed load against their SLOs. The
exact McNemar p-value is computed here from b and c, never copied from a report.

Pure and stdlib only: the config check (before `pulumi up`) and the policy pack (on the
Deployments a preview shows) call the same functions. Records travel as JSON (`to_json`,
`from_json`) in the fleet's rollout ConfigMap, which the policy reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spear.mcnemar import p_value

# "run hundreds": a gate on a handful of tool calls proves little about the parser.
MIN_TOOL_CALL_SAMPLES = 100

# (engine version = image tag, model repository, model revision): what a rollout moves together.
Pair = tuple[str, str, str]


def describe(pair: Pair) -> str:
    return f"{pair[0]} @ {pair[1]} revision {pair[2][:7]}"


@dataclass(frozen=True)
class Pin:
    """The tuple that "the endpoint works" means from now on."""
    engine_version: str
    model: str
    revision: str
    gateway_version: str
    harness_versions: tuple[tuple[str, str], ...]  # (harness, version), sorted by harness

    @property
    def pair(self) -> Pair:
        return (self.engine_version, self.model, self.revision)


@dataclass(frozen=True)
class Record:
    name: str
    pin: Pin
    tool_calls_passed: int
    tool_calls_total: int
    b: int  # paired eval: tasks the stable pair passes and the candidate fails
    c: int  # tasks the candidate passes and the stable pair fails
    alpha: float  # pre-registered threshold of the exact McNemar p-value
    ttft_seconds: float  # under replayed concurrent load, at the SLO's percentile
    ttft_slo_seconds: float
    itl_seconds: float
    itl_slo_seconds: float

    @property
    def p(self) -> float:
        return p_value(self.b, self.c)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name,
                "pin": {"engineVersion": self.pin.engine_version, "model": self.pin.model,
                        "revision": self.pin.revision, "gatewayVersion": self.pin.gateway_version,
                        "harnessVersions": dict(self.pin.harness_versions)},
                "toolCalls": {"passed": self.tool_calls_passed, "total": self.tool_calls_total},
                "pairedEval": {"b": self.b, "c": self.c, "alpha": self.alpha, "p": self.p},
                "latency": {"ttftSeconds": self.ttft_seconds, "ttftSloSeconds": self.ttft_slo_seconds,
                            "itlSeconds": self.itl_seconds, "itlSloSeconds": self.itl_slo_seconds}}


def from_json(value: Mapping[str, Any]) -> Record:
    """A record as to_json wrote it (numbers may come back as floats, as the engine gives them)."""
    pin, calls, paired, latency = (value["pin"], value["toolCalls"], value["pairedEval"],
                                   value["latency"])
    return Record(
        name=value["name"],
        pin=Pin(pin["engineVersion"], pin["model"], pin["revision"], pin["gatewayVersion"],
                tuple(sorted(dict(pin["harnessVersions"]).items()))),
        tool_calls_passed=int(calls["passed"]), tool_calls_total=int(calls["total"]),
        b=int(paired["b"]), c=int(paired["c"]), alpha=float(paired["alpha"]),
        ttft_seconds=float(latency["ttftSeconds"]), ttft_slo_seconds=float(latency["ttftSloSeconds"]),
        itl_seconds=float(latency["itlSeconds"]), itl_slo_seconds=float(latency["itlSloSeconds"]))


def failures(record: Record) -> list[str]:
    """Why a record does not pass the gate; [] when it passes."""
    reasons = []
    if record.tool_calls_total < MIN_TOOL_CALL_SAMPLES:
        reasons.append(f"the tool-call validator ran on {record.tool_calls_total} live samples,"
                       f" fewer than {MIN_TOOL_CALL_SAMPLES}")
    if record.tool_calls_passed != record.tool_calls_total:
        reasons.append(f"the tool-call validator passed {record.tool_calls_passed} of"
                       f" {record.tool_calls_total} live samples (it is fail-closed: all must pass)")
    if record.c <= record.b:
        reasons.append(f"the paired eval does not favour the candidate (b={record.b} losses,"
                       f" c={record.c} wins)")
    if not record.p < record.alpha:
        reasons.append(f"the exact McNemar p-value {record.p:.6g} (b={record.b}, c={record.c}) is"
                       f" not below the pre-registered alpha {record.alpha:g}")
    if record.ttft_seconds > record.ttft_slo_seconds:
        reasons.append(f"TTFT {record.ttft_seconds:g}s under replayed load exceeds the SLO"
                       f" {record.ttft_slo_seconds:g}s")
    if record.itl_seconds > record.itl_slo_seconds:
        reasons.append(f"inter-token latency {record.itl_seconds:g}s under replayed load exceeds"
                       f" the SLO {record.itl_slo_seconds:g}s")
    return reasons


def refusals(pair: Pair, records: Sequence[Record]) -> list[str]:
    """Why `pair` may not serve as stable: [] when a record for exactly this pair passes."""
    matching = [r for r in records if r.pin.pair == pair]
    if not matching:
        return [f"no gate record pins exactly {describe(pair)}"
                + (f" (records pin {', '.join(describe(r.pin.pair) for r in records)})"
                   if records else "")]
    reasons = []
    for record in matching:
        found = failures(record)
        if not found:
            return []
        reasons += [f"record {record.name}: {reason}" for reason in found]
    return reasons


def promotion_refusals(stable: Pair, previous: Pair | None, records: Sequence[Record]) -> list[str]:
    """Why this stable pair may not be deployed: a promotion (stable moved away from the previous
    pair) needs a passing record; a rollback to the previous pair, or the first stable pair of a
    fleet (no previous pair yet), does not."""
    if previous is None or stable == previous:
        return []
    return refusals(stable, records)
