from harness import check_stack, prod

from ports_distinct import POLICY


def _server_conf(host: str, port: float):
    props = prod("server-conf")
    props["binds"] = [{"host": host, "address": "127.0.0.1", "port": port, "what": "llama-server"}]
    return props


def test_prod_passes():
    assert check_stack(POLICY, prod("stack"), [prod("server-conf"), prod("systemd-unit")]) == []


def test_a_distinct_backend_table_passes():
    outputs = {**prod("stack"), "backends": {"local": 8080.0, "remote": 8081.0, "reds": 8082.0}}
    assert check_stack(POLICY, outputs, [prod("server-conf")]) == []


def test_backends_sharing_a_port_are_a_violation():
    outputs = {**prod("stack"), "backends": {"local": 8080.0, "remote": 8082.0, "reds": 8082.0}}
    [message] = check_stack(POLICY, outputs, [prod("server-conf")])
    assert message.startswith("seed 000 §6.2.7") and "backends reds, remote share" in message


def test_the_server_on_the_ssh_port_is_a_violation():
    [message] = check_stack(POLICY, prod("stack"), [_server_conf("reds.internal:22", 22.0)])
    assert "port 22 on reds.internal is bound by llama-server" in message and "sshd" in message


def test_a_loopback_host_shares_this_machines_ports_with_the_tunnel():
    [message] = check_stack(POLICY, prod("stack"), [_server_conf("127.0.0.1:2222", 8082.0)])
    assert "port 8082 on this machine" in message and "reds backend's SSH tunnel" in message


def test_the_tunnel_port_on_a_remote_host_passes():
    assert check_stack(POLICY, prod("stack"), [_server_conf("reds.internal:22", 8082.0)]) == []


def test_two_binds_of_one_port_on_one_host_are_a_violation():
    other = prod("systemd-unit")
    other["binds"] = [{"host": "reds.internal:22", "address": "0.0.0.0", "port": 8010.0,
                       "what": "metrics exporter"}]
    [message] = check_stack(POLICY, prod("stack"), [prod("server-conf"), other])
    assert "port 8010 on reds.internal is bound by llama-server" in message
    assert "metrics exporter" in message
