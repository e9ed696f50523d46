import yaml

from policies.gateway.hatch_alert_below_cap import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod


def hatch(**changes):
    props = prod(tokens.GATEWAY_CONFIG)
    config = yaml.safe_load(props["content"])
    config["spear_hatch"].update(changes)
    props["content"] = yaml.safe_dump(config)
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
    props = prod(tokens.GATEWAY_CONFIG)
    config = yaml.safe_load(props["content"])
    del config["spear_hatch"]["alert_usd"]
    props["content"] = yaml.safe_dump(config)
    assert len(check_resource(POLICY, tokens.GATEWAY_CONFIG, props)) == 1


def test_an_unknown_config_cannot_pass():
    props = prod(tokens.GATEWAY_CONFIG)
    props["content"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "content can't be known during preview" in message
