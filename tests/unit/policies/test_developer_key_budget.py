from policies.gateway.developer_key_budget import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod

SEED = 'seed 001 step 5 and "Budget hygiene"'


def key(**changes):
    return {**prod(tokens.GATEWAY_KEY), **changes}


def test_a_key_with_a_window_a_budget_and_coder_passes():
    assert check_resource(POLICY, tokens.GATEWAY_KEY, key()) == []


def test_a_key_without_a_budget_window_is_a_violation():
    [message] = check_resource(POLICY, tokens.GATEWAY_KEY, key(budget_duration=None))
    assert message.startswith(SEED)
    assert ("the key of ana: no budget_duration: the budget never resets and locks the developer"
            " out") in message
    assert "Fix: set developers.ana.budgetDuration" in message


def test_a_zero_budget_is_a_violation():
    [message] = check_resource(POLICY, tokens.GATEWAY_KEY, key(max_budget=0.0))
    assert "max_budget is not a finite amount greater than 0" in message


def test_frontier_given_directly_and_unknown_models_are_violations():
    [message] = check_resource(POLICY, tokens.GATEWAY_KEY, key(models=["coder", "frontier", "gpt"]))
    assert "frontier given directly: it is the hatch, reached by escalation only" in message
    assert "models ['gpt'] are not the gateway's (coder, frontier)" in message


def test_an_unknown_budget_cannot_pass():
    [message] = check_resource(POLICY, tokens.GATEWAY_KEY, key(max_budget=UNKNOWN))
    assert "max_budget can't be known during preview" in message
