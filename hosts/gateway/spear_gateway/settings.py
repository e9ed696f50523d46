"""The hooks' settings, from the proxy's environment (config.yaml's environment_variables or the
unit's): every problem reported at once, naming the variable and what is allowed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from spear.rules import CODER_MODEL, FRONTIER_MODEL
from spear.rules import CACHE_SALT_SCOPES

FLEET_API_PARTS = ("SERVER", "CA", "TOKEN")


@dataclass(frozen=True)
class Settings:
    fleet_model: str
    hatch_model: str
    hatch_cap_usd: float
    database_url: str | None
    default_max_tokens: int
    hold_ttl_seconds: float = 3600.0
    cache_salt_scope: str = "team"  # one cache_salt per team, or per developer
    # Where the fleet's pods are listed from (prefix-affinity routing, pods.py): the API
    # server's https URL, its CA (base64 PEM) and the router's token; None: no such routing.
    fleet_api: tuple[str, str, str] | None = None

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> Settings:
        problems = []
        cap = env.get("SPEAR_HATCH_MONTHLY_CAP_USD")
        try:
            cap_usd = float(cap) if cap is not None else None
        except ValueError:
            cap_usd = None
        if cap_usd is None or not math.isfinite(cap_usd) or cap_usd < 0:
            problems.append(f"SPEAR_HATCH_MONTHLY_CAP_USD={cap!r}: allowed is a number of USD >= 0")
        limit = env.get("SPEAR_DEFAULT_MAX_TOKENS", "4096")
        if not limit.isdigit() or int(limit) < 1:
            problems.append(f"SPEAR_DEFAULT_MAX_TOKENS={limit!r}: allowed is an integer >= 1")
        ttl = env.get("SPEAR_HOLD_TTL_SECONDS", "3600")
        if not ttl.isdigit() or int(ttl) < 60:
            problems.append(f"SPEAR_HOLD_TTL_SECONDS={ttl!r}: allowed is an integer >= 60 (longer"
                            " than any request, its retries and its escalation)")
        scope = env.get("SPEAR_CACHE_SALT_SCOPE", "team")
        if scope not in CACHE_SALT_SCOPES:
            problems.append(f"SPEAR_CACHE_SALT_SCOPE={scope!r}: allowed are"
                            f" {', '.join(CACHE_SALT_SCOPES)}")
        fleet = env.get("SPEAR_FLEET_MODEL", CODER_MODEL)
        if fleet == env.get("SPEAR_HATCH_MODEL", FRONTIER_MODEL):
            problems.append(f"SPEAR_HATCH_MODEL={fleet!r}: allowed is a model other than the"
                            " fleet's (SPEAR_FLEET_MODEL)")
        api = tuple(env.get(f"SPEAR_FLEET_API_{part}", "") for part in FLEET_API_PARTS)
        if any(api) and not all(api):
            problems.append("SPEAR_FLEET_API_SERVER, _CA and _TOKEN: allowed is all three (the"
                            " fleet's pods, for prefix-affinity routing) or none; missing "
                            + ", ".join(f"SPEAR_FLEET_API_{part}" for part, value
                                        in zip(FLEET_API_PARTS, api) if not value))
        elif any(api) and not api[0].startswith("https://"):
            problems.append(f"SPEAR_FLEET_API_SERVER={api[0]!r}: allowed is an https:// URL")
        if problems:
            raise ValueError("spear_gateway: " + "; ".join(problems))
        return cls(fleet_model=env.get("SPEAR_FLEET_MODEL", CODER_MODEL),
                   hatch_model=env.get("SPEAR_HATCH_MODEL", FRONTIER_MODEL),
                   hatch_cap_usd=cap_usd,
                   database_url=env.get("SPEAR_BUDGET_DATABASE_URL") or env.get("DATABASE_URL"),
                   default_max_tokens=int(limit), hold_ttl_seconds=float(ttl),
                   cache_salt_scope=scope, fleet_api=api if all(api) else None)


