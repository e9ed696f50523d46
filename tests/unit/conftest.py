"""Fixtures of the unit tests."""

import pulumi
import pytest

from spear.rules import PASSPHRASE_ENV, PASSPHRASE_FILE_ENV
from tests.support.stack_files import RecordingMocks


@pytest.fixture(scope="session", autouse=True)
def no_passphrase():
    """The program under mocks encrypts nothing; `scripts/env.sh` (which the test command
    sources) sets the example passphrase, under which config/load.py refuses an `up` of any
    stack but local. Session-wide, before module fixtures run the program; a test of that rule
    sets it itself."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(PASSPHRASE_ENV, raising=False)
        patch.delenv(PASSPHRASE_FILE_ENV, raising=False)
        yield


@pytest.fixture
def mocks():
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="spear-fleet", stack="test")
    yield mocks
    pulumi.runtime.set_all_config({}, [])
