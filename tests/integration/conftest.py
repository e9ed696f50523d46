"""Everything under tests/integration drives the real engine or real local hosts."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
