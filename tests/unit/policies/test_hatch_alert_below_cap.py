from policies.gateway.hatch_alert_below_cap import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod


def hatch(**changes):
    props = prod(tokens.GATEWAY_CONFIG)
    props["hatch"].update(changes)
    return props


def test_an_alert_below_the_cap_passes():
    assert check_resource(POLICY, tokens.GATEWAY_CONFIG, hatch()) == []


def test_an_alert_at_the_cap_is_a_violation():
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG,
                               hatch(alert_usd=200.0, monthly_cap_usd=200.0))
    assert message.startswith('seed 001 step 5 and "Budget hygiene" (the hatch has a hard monthly cap')
    assert "alert_usd 200.0 and monthly_cap_usd 200.0" in message
    assert "Fix: set gateway.hatch.alertUsd below gateway.hatch.monthlyCapUsd" in message


def test_a_missing_alert_is_a_violation():
    assert len(check_resource(POLICY, tokens.GATEWAY_CONFIG, hatch(alert_usd=None))) == 1


def test_an_unknown_cap_cannot_pass():
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, hatch(monthly_cap_usd=UNKNOWN))
    assert "hatch.monthly_cap_usd can't be known during preview" in message
