from harness import check_resource, prod

from jinja_enabled import POLICY


def test_jinja_passes():
    assert check_resource(POLICY, prod("server-conf")) == []


def test_no_jinja_is_a_violation():
    props = prod("server-conf")
    props["command_line"].remove("--jinja")
    [message] = check_resource(POLICY, props)
    assert message.startswith("seed 000 §6.2.2: --jinja is required")


def test_a_later_no_jinja_is_a_violation():
    props = prod("server-conf")
    props["command_line"].append("--no-jinja")
    assert len(check_resource(POLICY, props)) == 1
