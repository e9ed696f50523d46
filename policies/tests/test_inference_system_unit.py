from harness import check_resource, prod

from inference_system_unit import POLICY


def test_a_system_unit_in_system_slice_passes():
    assert check_resource(POLICY, prod("systemd-unit")) == []


def test_a_unit_in_user_slice_is_a_violation():
    props = prod("systemd-unit")
    props["content"] = props["content"].replace("Slice=system.slice", "Slice=user.slice")
    [message] = check_resource(POLICY, props)
    assert message.startswith("seed 000 §6.2.6") and "Slice=user.slice" in message


def test_a_user_unit_is_a_violation():
    props = prod("systemd-unit")
    props["scope"] = "user"
    props["unit_path"] = "/root/.config/systemd/user/spear-inference.service"
    [message] = check_resource(POLICY, props)
    assert "a user unit" in message and "not under /etc/systemd/system" in message


def test_a_unit_without_slice_line_is_a_violation():
    props = prod("systemd-unit")
    props["content"] = props["content"].replace("Slice=system.slice\n", "")
    [message] = check_resource(POLICY, props)
    assert "no Slice= line" in message


def test_other_units_are_not_its_business():
    props = prod("systemd-unit")
    props.update(unit="other.service", scope="user")
    assert check_resource(POLICY, props) == []
