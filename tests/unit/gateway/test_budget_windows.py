"""Budget windows: a key's window follows LiteLLM's budget_reset_at, the hatch's follows the
calendar month; neither starts anew while a request admitted in the old one is in flight. On
both ledgers (`open_store`, conftest.py), but a hold's expiry on the in-memory one only: its clock
is the test's, PostgreSQL's is its own (tests/integration/test_gateway_budget_store.py)."""

import pytest

from spear_gateway.budget import Ledger


def test_a_key_seen_for_the_first_time_starts_from_the_spend_litellm_reports(open_store):
    ledger = open_store(hatch_cap_usd=1.0)
    assert ledger.admit("ana", "a", 6.0, 10.0, window="w1", spend_usd=5.0) == "reject-quota"
    assert ledger.admit("ana", "a", 5.0, 10.0, window="w1", spend_usd=5.0) == "fleet"
    assert ledger.used_usd("ana") == 5.0


def test_a_new_window_starts_the_key_again_once_nothing_is_in_flight(open_store):
    ledger = open_store(hatch_cap_usd=1.0)
    ledger.admit("ana", "a", 10.0, 10.0, window="w1")
    ledger.settle("a", 10.0)
    assert ledger.admit("ana", "b", 1.0, 10.0, window="w1", spend_usd=10.0) == "reject-quota"
    assert ledger.admit("ana", "b", 1.0, 10.0, window="w2", spend_usd=0.0) == "fleet"
    assert ledger.used_usd("ana") == 0.0


def test_a_new_window_waits_for_the_requests_admitted_in_the_old_one(open_store):
    ledger = open_store(hatch_cap_usd=1.0)
    ledger.admit("ana", "a", 4.0, 10.0, window="w1")
    ledger.settle("a", 4.0)
    ledger.admit("ana", "b", 4.0, 10.0, window="w1")
    # LiteLLM reset the key while b is in flight: the old window still counts (4 + 4 held).
    assert ledger.admit("ana", "c", 3.0, 10.0, window="w2", spend_usd=0.0) == "reject-quota"
    ledger.settle("b", 4.0)
    assert ledger.admit("ana", "c", 3.0, 10.0, window="w2", spend_usd=0.0) == "fleet"
    assert ledger.used_usd("ana") == 0.0


def test_a_key_without_a_budget_is_never_refused_for_quota_but_its_escalations_count(open_store):
    ledger = open_store(hatch_cap_usd=5.0)
    assert ledger.admit("master", "a", 1e6, None) == "fleet"
    assert ledger.escalate("a", 503, estimate_usd=5.0) == "hatch"
    ledger.admit("master", "b", 1e6, None)
    assert ledger.escalate("b", 503, estimate_usd=0.01) == "reject-hatch-budget"


def test_the_hatch_cap_starts_again_in_a_new_month_once_no_escalation_is_in_flight(open_store):
    ledger = open_store(hatch_cap_usd=5.0)
    ledger.admit("ana", "a", 1.0, None)
    ledger.escalate("a", 503, estimate_usd=5.0, month="2026-11")
    ledger.admit("ana", "b", 1.0, None)
    assert ledger.escalate("b", 503, estimate_usd=1.0, month="2026-12") == "reject-hatch-budget"
    ledger.settle("a", 1.0, hatch_usd=5.0)
    assert ledger.escalate("b", 503, estimate_usd=1.0, month="2026-12") == "hatch"
    ledger.settle("b", 1.0, hatch_usd=1.0)
    assert ledger.hatch_spent_usd == 1.0


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_hold_its_process_never_settled_is_charged_in_full_after_its_ttl_and_frees_the_window():
    clock = Clock()
    ledger = Ledger(hatch_cap_usd=10.0, hold_ttl_seconds=600, clock=clock)
    ledger.admit("ana", "lost", 4.0, 10.0, window="w1")
    ledger.escalate("lost", 503, estimate_usd=2.0)
    clock.now = 599
    assert ledger.admit("ana", "b", 1.0, 10.0, window="w2") == "fleet"     # still in flight
    ledger.settle("b", 1.0)
    clock.now = 601
    # The lost request's process is gone: its hold is charged, the window may roll.
    assert ledger.admit("ana", "c", 10.0, 10.0, window="w2") == "fleet"
    assert ledger.used_usd("ana") == 0.0 and ledger.hatch_spent_usd == 2.0


def test_a_late_settlement_of_an_expired_hold_is_refused_and_charges_nothing_more():
    from spear_gateway.budget import HoldExpired
    clock = Clock()
    ledger = Ledger(hatch_cap_usd=10.0, hold_ttl_seconds=60, clock=clock)
    ledger.admit("ana", "slow", 4.0, 10.0)
    clock.now = 61
    ledger.expire_stale()
    with pytest.raises(HoldExpired, match="expired"):
        ledger.settle("slow", 1.0)
    assert ledger.used_usd("ana") == 4.0


def test_an_expired_hold_is_charged_what_its_stream_measured_or_in_full_when_nothing_was():
    clock = Clock()
    ledger = Ledger(hatch_cap_usd=10.0, hold_ttl_seconds=60, clock=clock)
    ledger.admit("ana", "streamed", 4.0, 10.0)
    ledger.admit("ana", "silent", 3.0, 10.0)
    ledger.measure("streamed", 0.5)
    ledger.measure("streamed", 9.0)  # never above the hold
    assert ledger.measured["streamed"] == 4_000_000_000
    ledger.measure("streamed", 1.25)
    clock.now = 61
    ledger.expire_stale()
    assert ledger.used_usd("ana") == 1.25 + 3.0 and ledger.holds_in_flight() == 0
    ledger.measure("streamed", 2.0)  # settled: nothing more is recorded
    assert "streamed" not in ledger.measured
