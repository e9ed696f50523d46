from policies.inference.ports_distinct import POLICY
from spear import tokens
from tests.support.policy_harness import check_stack, prod, prod_stack


def _server_conf(host: str, port: float):
    props = prod(tokens.SERVER_CONF)
    props["binds"] = [{"host": host, "address": "127.0.0.1", "port": port, "what": "llama-server"}]
    return tokens.SERVER_CONF, props


def test_prod_passes():
    assert check_stack(POLICY, prod_stack(), [(tokens.SERVER_CONF, prod(tokens.SERVER_CONF)),
                                              (tokens.SYSTEMD_UNIT, prod(tokens.SYSTEMD_UNIT))]) == []


def test_backends_sharing_a_port_are_a_violation():
    outputs = prod_stack()
    outputs["backends"]["remote"]["port"] = 8082.0
    [message] = check_stack(POLICY, outputs, [_server_conf("reds.internal:22", 8010.0)])
    assert message.startswith("seed 000 §6.2.7")
    assert "port 8082 on this machine is bound by the reds backend's client port and the" \
           " remote backend's client port" in message


def test_an_api_backend_takes_no_port():
    outputs = prod_stack()
    assert outputs["backends"]["anthropic"]["port"] is None
    assert check_stack(POLICY, outputs, [_server_conf("reds.internal:22", 8010.0)]) == []


def test_the_server_on_the_ssh_port_is_a_violation():
    [message] = check_stack(POLICY, prod_stack(), [_server_conf("reds.internal:22", 22.0)])
    assert "port 22 on reds.internal is bound by llama-server" in message and "sshd" in message


def test_a_loopback_host_shares_this_machines_ports_with_the_tunnels():
    [message] = check_stack(POLICY, prod_stack(), [_server_conf("127.0.0.1:2222", 8081.0)])
    assert "port 8081 on this machine" in message and "remote backend's client port" in message


def test_the_tunnel_port_on_a_remote_host_passes():
    assert check_stack(POLICY, prod_stack(), [_server_conf("reds.internal:22", 8082.0)]) == []


def test_two_loopback_hosts_serving_one_port_are_a_violation():
    [message] = check_stack(POLICY, prod_stack(), [_server_conf("127.0.0.1:2222", 8010.0),
                                                   _server_conf("127.0.0.1:2223", 8010.0)])
    assert "port 8010 on this machine is bound by llama-server" in message


def test_two_binds_of_one_port_on_one_host_are_a_violation():
    other = prod(tokens.SYSTEMD_UNIT)
    other["binds"] = [{"host": "reds.internal:22", "address": "0.0.0.0", "port": 8010.0,
                       "what": "metrics exporter"}]
    [message] = check_stack(POLICY, prod_stack(), [(tokens.SERVER_CONF, prod(tokens.SERVER_CONF)),
                                                   (tokens.SYSTEMD_UNIT, other)])
    assert "port 8010 on reds.internal is bound by llama-server" in message
    assert "metrics exporter" in message
