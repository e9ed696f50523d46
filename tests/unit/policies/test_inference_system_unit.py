from policies.inference.inference_system_unit import POLICY
from spear import tokens
from tests.support.policy_harness import check_resource, prod



def test_a_system_unit_in_system_slice_passes():
    assert check_resource(POLICY, tokens.SYSTEMD_UNIT, prod(tokens.SYSTEMD_UNIT)) == []


def test_a_unit_in_user_slice_is_a_violation():
    props = prod(tokens.SYSTEMD_UNIT)
    props["content"] = props["content"].replace("Slice=system.slice", "Slice=user.slice")
    [message] = check_resource(POLICY, tokens.SYSTEMD_UNIT, props)
    assert message.startswith("seed 000 §6.2.6") and "Slice=user.slice" in message


def test_a_user_unit_is_a_violation():
    props = prod(tokens.SYSTEMD_UNIT)
    props["scope"] = "user"
    props["unit_path"] = "/root/.config/systemd/user/spear-inference.service"
    [message] = check_resource(POLICY, tokens.SYSTEMD_UNIT, props)
    assert "a user unit" in message and "not under /etc/systemd/system" in message


def test_a_unit_without_slice_line_is_a_violation():
    props = prod(tokens.SYSTEMD_UNIT)
    props["content"] = props["content"].replace("Slice=system.slice\n", "")
    [message] = check_resource(POLICY, tokens.SYSTEMD_UNIT, props)
    assert "no Slice= line" in message


def test_other_units_are_not_its_business():
    props = prod(tokens.SYSTEMD_UNIT)
    props.update(unit="other.service", scope="user")
    assert check_resource(POLICY, tokens.SYSTEMD_UNIT, props) == []
