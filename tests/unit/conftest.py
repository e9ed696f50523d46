"""Fixtures of the unit tests."""

import pulumi
import pytest

from tests.support.stack_files import RecordingMocks


@pytest.fixture
def mocks():
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="spear-fleet", stack="test")
    yield mocks
    pulumi.runtime.set_all_config({}, [])
