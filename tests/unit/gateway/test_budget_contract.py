"""Every assertion of the cookbook's gateway_budget.py (seed 001 step 5), held against both of
spear-fleet's ledgers: the in-memory one and PostgreSQL's (`open_store`, conftest.py). A month
reset is a new budget window: the gateway passes each key's window and the hatch's month with
every call instead of resetting. The contract counts a developer's quota in tokens; the gateway
counts it in USD against the key's max_budget, so its token amounts appear here as dollars (1,000
tokens of the contract = 1 USD here: a 1,000,000-token quota is a 1,000 USD budget)."""

import math

import pytest

from spear_gateway.budget import ContractViolation

BUDGET = 1000.0  # the contract's 1_000_000-token quota
KEYS = ("ana", "bob", "cyn", "dan")


def snapshot(store):
    """What a store shows of its state: each key's spend and holds, and the hatch's spend."""
    return ({key: (store.used_usd(key), store.held_usd(key)) for key in KEYS},
            store.hatch_spent_usd, store.holds_in_flight())


# --- Bad input is refused, naming what is allowed, and changes nothing.

@pytest.mark.parametrize("bad_cap", [-1.0, True, "10", math.nan, math.inf])
def test_a_hatch_cap_that_is_not_money_is_refused(open_store, bad_cap):
    with pytest.raises(ContractViolation, match="hatch_cap_usd .* allowed is a finite number"):
        open_store(hatch_cap_usd=bad_cap)


@pytest.mark.parametrize("bad_budget", [-1, True, "25", math.nan])
def test_a_key_budget_that_is_not_money_is_refused_and_admits_nothing(open_store, bad_budget):
    ledger = open_store(hatch_cap_usd=100.0)
    with pytest.raises(ContractViolation, match="budget_usd"):
        ledger.admit("ana", "r", 1.0, bad_budget)
    assert ledger.holds_in_flight() == 0


@pytest.mark.parametrize("bad_worst", [-1, 0, True, "1", math.inf])
def test_a_worst_case_that_is_not_a_positive_amount_is_refused(open_store, bad_worst):
    ledger = open_store(hatch_cap_usd=100.0)
    with pytest.raises(ContractViolation, match="worst_usd"):
        ledger.admit("ana", "bad", bad_worst, BUDGET)
    assert ledger.holds_in_flight() == 0


@pytest.mark.parametrize("bad_amount", [-1, -0.01, True, math.nan])
def test_a_settlement_that_is_not_money_is_refused_and_charges_nothing(open_store, bad_amount):
    ledger = open_store(hatch_cap_usd=100.0)
    assert ledger.admit("ana", "negative", 0.1, BUDGET) == "fleet"
    with pytest.raises(ContractViolation):
        ledger.settle("negative", bad_amount)
    with pytest.raises(ContractViolation):
        ledger.settle("negative", 0, hatch_usd=bad_amount)
    assert ledger.used_usd("ana") == 0 and ledger.held_usd("ana") == 0.1
    ledger.settle("negative", 0)
    assert ledger.used_usd("ana") == 0 and ledger.holds_in_flight() == 0


# --- The happy path, and no double spend.

@pytest.fixture
def ana_settled_31(open_store):
    ledger = open_store(hatch_cap_usd=100.0)
    assert ledger.admit("ana", "r1", 40.0, BUDGET) == "fleet"
    ledger.settle("r1", 31.0)
    return ledger


def test_an_admitted_request_settles_its_actual_cost(ana_settled_31):
    assert ana_settled_31.used_usd("ana") == 31.0
    assert ana_settled_31.holds_in_flight() == 0


def test_settling_a_request_twice_fails_loudly_and_charges_once(ana_settled_31):
    with pytest.raises(ContractViolation, match="double settle"):
        ana_settled_31.settle("r1", 31.0)
    assert ana_settled_31.used_usd("ana") == 31.0


def test_a_stream_cut_short_settles_what_it_used_and_the_success_after_it_charges_nothing(open_store):
    # The hook settles a stream its client left at what it carried (litellm_hooks.py settle_cut);
    # LiteLLM may still report the stream's success after it: refused, charged once.
    ledger = open_store(hatch_cap_usd=100.0)
    assert ledger.admit("ana", "cut", 5.0, BUDGET) == "fleet"
    ledger.settle("cut", 0.25)
    assert (ledger.used_usd("ana"), ledger.holds_in_flight()) == (0.25, 0)
    with pytest.raises(ContractViolation, match="double settle"):
        ledger.settle("cut", 5.0)
    assert ledger.used_usd("ana") == 0.25


def test_a_replayed_request_id_is_not_admitted_again(ana_settled_31):
    assert ana_settled_31.admit("ana", "r1", 0.001, BUDGET) == "reject-duplicate"
    assert ana_settled_31.holds_in_flight() == 0


def test_a_request_id_in_flight_is_not_admitted_twice(open_store):
    ledger = open_store(hatch_cap_usd=100.0)
    assert ledger.admit("ana", "r1", 1.0, BUDGET) == "fleet"
    assert ledger.admit("ana", "r1", 1.0, BUDGET) == "reject-duplicate"
    assert ledger.held_usd("ana") == 1.0


# --- Quota is enforced against reservations, not only settled spend.

def test_two_concurrent_requests_cannot_claim_the_same_headroom(ana_settled_31):
    ledger = ana_settled_31
    assert ledger.admit("ana", "r2", 900.0, BUDGET) == "fleet"      # 31 used + 900 held
    assert ledger.admit("ana", "r3", 100.0, BUDGET) == "reject-quota"   # 931 + 100 > 1000
    assert ledger.admit("ana", "r4", 69.0, BUDGET) == "fleet"       # 931 + 69 = 1000: admitted
    assert ledger.admit("ana", "r5", 0.001, BUDGET) == "reject-quota"   # a tenth of a cent over


def test_spend_accumulates_and_freed_headroom_returns(ana_settled_31):
    ledger = ana_settled_31
    ledger.admit("ana", "r2", 900.0, BUDGET)
    ledger.admit("ana", "r4", 69.0, BUDGET)
    assert ledger.admit("ana", "r5", 0.001, BUDGET) == "reject-quota"
    ledger.settle("r2", 100.0)                       # actual far below the hold
    assert ledger.used_usd("ana") == 131.0
    assert ledger.admit("ana", "r5", 0.001, BUDGET) == "fleet"
    ledger.settle("r4", 0)
    ledger.settle("r5", 0)
    assert ledger.used_usd("ana") == 131.0 and ledger.holds_in_flight() == 0


def test_another_key_has_its_own_budget(ana_settled_31):
    assert ana_settled_31.admit("ana", "big", 970.0, BUDGET) == "reject-quota"
    assert ana_settled_31.admit("bob", "big", 970.0, BUDGET) == "fleet"


def test_a_rejection_changes_nothing(ana_settled_31):
    before = snapshot(ana_settled_31)
    assert ana_settled_31.admit("ana", "r6", 10_000.0, BUDGET) == "reject-quota"
    assert snapshot(ana_settled_31) == before


# --- Settling above what was held is a contract violation, not a bigger bill.

def test_settling_above_the_reservation_is_refused_and_changes_nothing(open_store):
    ledger = open_store(hatch_cap_usd=100.0)
    assert ledger.admit("bob", "r7", 10.0, BUDGET) == "fleet"
    before = snapshot(ledger)
    with pytest.raises(ContractViolation, match="above reservation"):
        ledger.settle("r7", 10.001)
    assert snapshot(ledger) == before
    ledger.settle("r7", 10.0)                        # at the bound: fine
    assert ledger.used_usd("bob") == 10.0


def test_hatch_dollars_on_a_request_that_never_escalated_are_refused(open_store):
    ledger = open_store(hatch_cap_usd=100.0)
    assert ledger.admit("bob", "r8", 1.0, BUDGET) == "fleet"
    with pytest.raises(ContractViolation, match="hatch reservation"):
        ledger.settle("r8", 0.5, hatch_usd=0.50)
    assert ledger.hatch_spent_usd == 0.0 and ledger.held_usd("bob") == 1.0
    ledger.settle("r8", 0.5)


def test_a_request_never_admitted_cannot_settle(open_store):
    with pytest.raises(ContractViolation, match="unknown request"):
        open_store(hatch_cap_usd=1.0).settle("ghost", 0)


# --- The hatch: 429 and 5xx escalate, 4xx never does, the cap counts in-flight holds.

@pytest.fixture
def hatch_spent_3_10(open_store):
    ledger = open_store(hatch_cap_usd=10.0)
    assert ledger.admit("ana", "h1", 50.0, BUDGET) == "fleet"
    assert ledger.escalate("h1", 400, estimate_usd=1.0) == "reject-client-error"
    assert ledger.escalate("h1", 429, estimate_usd=4.0) == "hatch"
    ledger.settle("h1", 20.0, hatch_usd=3.10)
    return ledger


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_a_client_error_never_reaches_the_hatch(open_store, status):
    ledger = open_store(hatch_cap_usd=10.0)
    ledger.admit("ana", "c", 1.0, BUDGET)
    assert ledger.escalate("c", status, estimate_usd=1.0) == "reject-client-error"
    with pytest.raises(ContractViolation, match="hatch reservation"):  # nothing held there
        ledger.settle("c", 1.0, hatch_usd=0.01)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 599, "timeout", "connection"])
def test_a_rate_limit_a_server_error_or_no_answer_escalates(open_store, status):
    ledger = open_store(hatch_cap_usd=10.0)
    ledger.admit("ana", "e", 1.0, BUDGET)
    assert ledger.escalate("e", status, estimate_usd=1.0) == "hatch"


def test_a_429_escalation_settles_on_the_hatch(hatch_spent_3_10):
    assert hatch_spent_3_10.hatch_spent_usd == 3.10


def test_the_hatch_cap_counts_holds_in_flight_and_repeated_escalation_is_idempotent(hatch_spent_3_10):
    ledger = hatch_spent_3_10
    assert ledger.admit("bob", "h2", 50.0, BUDGET) == "fleet"
    assert ledger.escalate("h2", 503, estimate_usd=6.0) == "hatch"      # 3.10 + 6.00 <= 10
    assert ledger.escalate("h2", 503, estimate_usd=999.0) == "hatch"    # idempotent
    with pytest.raises(ContractViolation, match="hatch reservation"):  # still the first hold
        ledger.settle("h2", 10.0, hatch_usd=6.01)
    assert ledger.admit("cyn", "h3", 50.0, BUDGET) == "fleet"
    assert ledger.escalate("h3", 503, estimate_usd=1.0) == "reject-hatch-budget"  # 9.10 + 1 > 10
    ledger.settle("h2", 10.0, hatch_usd=0.40)                          # actual: only $0.40
    assert ledger.escalate("h3", 503, estimate_usd=1.0) == "hatch"      # freed: 3.50 + 1 <= 10
    ledger.settle("h3", 10.0, hatch_usd=1.0)
    assert ledger.hatch_spent_usd == 4.50


def test_the_hatch_cap_is_inclusive_at_the_boundary(hatch_spent_3_10):
    ledger = hatch_spent_3_10
    ledger.admit("cyn", "h3", 1.0, BUDGET)
    ledger.escalate("h3", 503, estimate_usd=1.40)
    ledger.settle("h3", 1.0, hatch_usd=1.40)                            # 4.50 spent
    assert ledger.admit("dan", "h4", 1.0, BUDGET) == "fleet"
    assert ledger.escalate("h4", 503, estimate_usd=5.50) == "hatch"     # 4.50 + 5.50 == 10.00
    ledger.settle("h4", 0, hatch_usd=5.50)
    assert ledger.hatch_spent_usd == 10.0


def test_only_a_request_in_flight_may_escalate(hatch_spent_3_10):
    with pytest.raises(ContractViolation, match="in flight"):
        hatch_spent_3_10.escalate("h1", 503, estimate_usd=1.0)          # settled already
    with pytest.raises(ContractViolation, match="in flight"):
        hatch_spent_3_10.escalate("never-admitted", 503, estimate_usd=1.0)


def test_five_7_dollar_escalations_against_a_20_dollar_cap_admit_two_and_never_shrink_a_request(
        open_store):
    ledger = open_store(hatch_cap_usd=20.0)
    outcomes = []
    for i in range(5):
        ledger.admit("dev", f"s{i}", 1.0, 10_000.0)
        verdict = ledger.escalate(f"s{i}", 503, estimate_usd=7.0)
        outcomes.append(verdict)
        ledger.settle(f"s{i}", 0.5, hatch_usd=7.0 if verdict == "hatch" else 0.0)
    assert outcomes == ["hatch", "hatch", "reject-hatch-budget", "reject-hatch-budget",
                        "reject-hatch-budget"]
    assert ledger.hatch_spent_usd == 14.0                                # 2 * 7; never 21


# --- A new month.

def test_a_new_month_waits_for_the_requests_in_flight_then_restores_admission(open_store):
    ledger = open_store(hatch_cap_usd=0.0)
    assert ledger.admit("ana", "m1", 100.0, 100.0, window="m-1") == "fleet"
    assert ledger.admit("ana", "m2", 0.001, 100.0, window="m-2") == "reject-quota"  # m1 held
    ledger.settle("m1", 100.0)
    assert ledger.admit("ana", "m2", 0.001, 100.0, window="m-1") == "reject-quota"
    assert ledger.admit("ana", "m2", 0.001, 100.0, window="m-2") == "fleet"


def test_request_ids_stay_unique_across_a_new_month(open_store):
    ledger = open_store(hatch_cap_usd=1.0)
    ledger.admit("ana", "m1", 1.0, 100.0, window="m-1")
    ledger.settle("m1", 1.0)
    assert ledger.admit("ana", "m1", 1.0, 100.0, window="m-2") == "reject-duplicate"


def test_a_zero_hatch_cap_admits_no_escalation(open_store):
    ledger = open_store(hatch_cap_usd=0.0)
    ledger.admit("ana", "z", 1.0, 100.0)
    assert ledger.escalate("z", 503, estimate_usd=0.01) == "reject-hatch-budget"
