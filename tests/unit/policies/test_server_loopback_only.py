import pytest

from policies.inference.server_loopback_only import POLICY
from spear import tokens
from tests.support.policy_harness import check_resource, prod



def _listening_on(host):
    props = prod(tokens.SERVER_CONF)
    argv = props["command_line"]
    argv[argv.index("--host") + 1] = host
    return props


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_passes(host):
    assert check_resource(POLICY, tokens.SERVER_CONF, _listening_on(host)) == []


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "reds.internal"])
def test_any_other_address_is_a_violation(host):
    [message] = check_resource(POLICY, tokens.SERVER_CONF, _listening_on(host))
    assert message.startswith("seed 000 §6.2") and f"listens on {host}," in message
    assert "server.host to 127.0.0.1" in message


def test_no_host_flag_is_a_violation():
    props = prod(tokens.SERVER_CONF)
    argv = props["command_line"]
    del argv[argv.index("--host"):argv.index("--host") + 2]
    [message] = check_resource(POLICY, tokens.SERVER_CONF, props)
    assert "its default address" in message
