"""Everything under tests/integration drives the real engine or real local hosts."""

import pytest

from tests.support.kube import session_cluster


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def kube_cluster():
    """The session's local Kubernetes cluster (tests/support/kube.py)."""
    with session_cluster() as info:
        yield info
