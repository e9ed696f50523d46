"""Budgets that hold: the contract of the cookbook's `gateway_budget.py` (seed 001 step 5), in
USD per developer key and for the hatch's monthly cap.

Reserve, then settle. Admission holds the request's worst case (its max_tokens priced at the
model's output price, plus an upper bound of its prompt priced at the input price) against the
key's budget, counting settled spend AND every hold still in flight, so concurrent requests
cannot each claim the same headroom. Settlement happens exactly once per request id and never
above what was held. The hatch's cap counts in-flight holds the same way, is inclusive at the
boundary, and an escalation is idempotent per request. Over a limit the request is rejected and
nothing changes: never a silent downgrade.

Money is kept in integer nano-dollars (`Nanos`) so that sums are exact and the inclusive
boundary is exact (3.10 + 6.00 <= 10 must not fail on a float's last bit); holds round up,
settlements to nearest, so an actual cost equal to the worst case settles at the hold.

`BudgetRules` is the whole decision logic as pure functions of a snapshot; `Ledger` keeps the
state in memory (a gateway without a database); `pg_store` keeps the same state in PostgreSQL
and calls the same rules inside a transaction. The contract tests drive both.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal
from typing import Literal

from spear_gateway.hatch import may_escalate

NANOS_PER_USD = 1_000_000_000
Admission = Literal["fleet", "reject-duplicate", "reject-quota"]
Escalation = Literal["hatch", "reject-client-error", "reject-hatch-budget"]


@dataclass(frozen=True)
class DeveloperUsage:
    """One developer's line of the gateway's exporter (spear_gateway/exporter.py)."""
    developer: str
    team: str
    spent_usd: float  # settled in the key's budget window, as the ledger holds it
    budget_usd: float
    prompt_tokens: int
    completion_tokens: int


class ContractViolation(ValueError):
    """A call the contract forbids (double settle, settle above the hold, bad money, escalating
    a request not in flight). Nothing was changed."""


class HoldExpired(ContractViolation):
    """The request was settled already, by expiry: its process never settled it within the hold
    TTL (it crashed or was restarted mid-request), so its whole hold was charged."""


def is_money(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value >= 0


def _money(name: str, value: object) -> Decimal:
    if not is_money(value):
        raise ContractViolation(f"{name} {value!r}: allowed is a finite number of USD >= 0 "
                                "(not a bool, not a string)")
    return Decimal(repr(value)) if type(value) is float else Decimal(value)


def nanos_up(name: str, usd: object) -> int:
    """A hold in nano-dollars, rounded up: a hold is never smaller than the cost it covers."""
    return int((_money(name, usd) * NANOS_PER_USD).to_integral_value(ROUND_CEILING))


def nanos(name: str, usd: object) -> int:
    """A settled amount in nano-dollars, rounded to nearest."""
    return int((_money(name, usd) * NANOS_PER_USD).to_integral_value(ROUND_HALF_EVEN))


def usd(amount_nanos: int) -> float:
    return amount_nanos / NANOS_PER_USD


@dataclass(frozen=True)
class Hold:
    """An admitted request in flight: whose key, what it holds, and its hatch hold if any."""

    key: str
    held: int
    hatch_held: int | None = None


class BudgetRules:
    """The decisions, as pure functions of what is spent and held. A rejection is a return
    value; a contract violation raises before anything could be written."""

    @staticmethod
    def admit(*, known: bool, used: int, in_flight: int, budget: int | None,
              worst: int) -> Admission:
        if known:
            return "reject-duplicate"
        if budget is not None and used + in_flight + worst > budget:
            return "reject-quota"
        return "fleet"

    @staticmethod
    def escalate(*, hold: Hold, fleet_status: int | str, hatch_spent: int, hatch_in_flight: int,
                 cap: int, estimate: int) -> Escalation:
        if hold.hatch_held is not None:
            return "hatch"  # idempotent: the same request escalating again holds nothing more
        if not may_escalate(fleet_status):
            return "reject-client-error"
        if hatch_spent + hatch_in_flight + estimate > cap:
            return "reject-hatch-budget"
        return "hatch"

    @staticmethod
    def rolls(*, current: str | None, window: str, holds: int) -> bool:
        """Whether a budget window (a key's, or the hatch's month) starts anew: only when the
        window changed and no request admitted in the old one is still in flight; until then the
        old window keeps counting, which can only make admission stricter."""
        return current != window and holds == 0

    @staticmethod
    def check_settle(request_id: str, hold: Hold | None, settled: bool, key_amount: int,
                     hatch_amount: int, expired: bool = False) -> Hold:
        if expired:
            raise HoldExpired(f"request {request_id}: its hold expired and was charged in full")
        if settled:
            raise ContractViolation(f"request {request_id}: double settle (it was settled before)")
        if hold is None:
            raise ContractViolation(f"request {request_id}: unknown request (never admitted)")
        if key_amount > hold.held:
            raise ContractViolation(
                f"request {request_id}: settled above reservation ({usd(key_amount)} USD > "
                f"{usd(hold.held)} USD held)")
        if hatch_amount > (hold.hatch_held or 0):
            raise ContractViolation(
                f"request {request_id}: settled above hatch reservation ({usd(hatch_amount)} USD "
                f"> {usd(hold.hatch_held or 0)} USD held on the hatch)")
        return hold


@dataclass
class Ledger:
    """The budgets in memory, for one process (a gateway without a database)."""

    hatch_cap_usd: float
    used: dict[str, int] = field(default_factory=dict)
    held: dict[str, Hold] = field(default_factory=dict)
    hatch_spent: int = 0
    done: set[str] = field(default_factory=set)  # settled request ids, never reused
    windows: dict[str, str] = field(default_factory=dict)  # each key's budget window
    month: str | None = None  # the hatch cap's window
    # A hold older than this was never settled by its process (crashed, restarted): it is
    # charged in full, so it can neither hold a budget window open nor be under-counted.
    hold_ttl_seconds: float | None = None
    clock: Callable[[], float] = time.monotonic
    admitted_at: dict[str, float] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)
    measured: dict[str, int] = field(default_factory=dict)  # request id -> used so far (nanos)

    def __post_init__(self) -> None:
        self.cap = nanos("hatch_cap_usd", self.hatch_cap_usd)

    def admit(self, key: str, request_id: str, worst_usd: float, budget_usd: float | None, *,
              window: str = "", spend_usd: float = 0.0) -> Admission:
        """Hold `worst_usd` against the key's `budget_usd` (None: the key has no budget), or
        reject and change nothing. `window` names the key's budget window; when it changes the
        key's spend starts again from `spend_usd` (what LiteLLM reports for the new window)."""
        worst = nanos_up("worst_usd", worst_usd)
        budget = None if budget_usd is None else nanos("budget_usd", budget_usd)
        spend = nanos("spend_usd", spend_usd)
        if worst <= 0:
            raise ContractViolation(f"worst_usd {worst_usd!r}: a request's worst case must be > 0")
        self.expire_stale()
        in_flight = [h.held for h in self.held.values() if h.key == key]
        rolls = BudgetRules.rolls(current=self.windows.get(key), window=window, holds=len(in_flight))
        verdict = BudgetRules.admit(
            known=request_id in self.held or request_id in self.done,
            used=spend if rolls else self.used.get(key, 0),
            in_flight=sum(in_flight), budget=budget, worst=worst)
        if verdict == "fleet":
            if rolls:
                self.windows[key], self.used[key] = window, spend
            self.held[request_id] = Hold(key, worst)
            self.admitted_at[request_id] = self.clock()
        return verdict

    def escalate(self, request_id: str, fleet_status: int | str, estimate_usd: float, *,
                 month: str = "") -> Escalation:
        """The fleet failed this admitted request: hold `estimate_usd` on the hatch, or say no.
        `month` names the cap's window; the hatch's spend starts again when it changes."""
        estimate = nanos_up("estimate_usd", estimate_usd)
        self.expire_stale()
        hold = self.held.get(request_id)
        if hold is None or request_id in self.done:
            raise ContractViolation(f"request {request_id}: only a request in flight may escalate")
        hatch_holds = [h.hatch_held for h in self.held.values() if h.hatch_held is not None]
        if BudgetRules.rolls(current=self.month, window=month, holds=len(hatch_holds)):
            self.month, self.hatch_spent = month, 0
        verdict = BudgetRules.escalate(
            hold=hold, fleet_status=fleet_status, hatch_spent=self.hatch_spent,
            hatch_in_flight=sum(hatch_holds),
            cap=self.cap, estimate=estimate)
        if verdict == "hatch" and hold.hatch_held is None:
            self.held[request_id] = Hold(hold.key, hold.held, estimate)
        return verdict

    def settle(self, request_id: str, key_usd: float, hatch_usd: float = 0.0) -> None:
        """Charge the actual cost exactly once; every check precedes any change."""
        key_amount, hatch_amount = nanos("key_usd", key_usd), nanos("hatch_usd", hatch_usd)
        hold = BudgetRules.check_settle(request_id, self.held.get(request_id),
                                        request_id in self.done, key_amount, hatch_amount,
                                        expired=request_id in self.expired)
        self._charge(request_id, hold, key_amount, hatch_amount)

    def _charge(self, request_id: str, hold: Hold, key_amount: int, hatch_amount: int) -> None:
        del self.held[request_id]
        self.measured.pop(request_id, None)
        self.admitted_at.pop(request_id, None)
        self.used[hold.key] = self.used.get(hold.key, 0) + key_amount
        self.hatch_spent += hatch_amount
        self.done.add(request_id)

    def measure(self, request_id: str, key_usd: float) -> None:
        """What a request in flight has used so far (a stream's checkpoint): what its expiry
        charges the key if its process never settles it. Nothing for a settled request."""
        amount = nanos("key_usd", key_usd)
        if request_id in self.held:
            self.measured[request_id] = min(amount, self.held[request_id].held)

    def expire_stale(self) -> None:
        """Charge every hold older than hold_ttl_seconds: the key what was measured of it, or
        in full when nothing was; the hatch in full."""
        if self.hold_ttl_seconds is None:
            return
        cutoff = self.clock() - self.hold_ttl_seconds
        for request_id in [r for r, t in self.admitted_at.items() if t < cutoff]:
            hold = self.held[request_id]
            self._charge(request_id, hold, self.measured.pop(request_id, hold.held),
                         hold.hatch_held or 0)
            self.expired.add(request_id)

    def used_usd(self, key: str) -> float:
        return usd(self.used.get(key, 0))

    def held_usd(self, key: str) -> float:
        return usd(sum(h.held for h in self.held.values() if h.key == key))

    @property
    def hatch_spent_usd(self) -> float:
        return usd(self.hatch_spent)

    def hatch_spent_in(self, month: str) -> float:
        return usd(self.hatch_spent) if self.month == month else 0.0

    def holds_in_flight(self) -> int:
        return len(self.held)

    def oldest_hold_seconds(self) -> float:
        """How long the oldest hold not settled has been held (0 with none)."""
        now = self.clock()
        return max((now - self.admitted_at[r] for r in self.held if r in self.admitted_at),
                   default=0.0)

    def developer_usage(self) -> list[DeveloperUsage]:
        return []  # no keys without a database: nothing to say per developer

    def key_owner(self, token: str) -> None:
        return None  # ... and no key to count a harness's report against
