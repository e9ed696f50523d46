"""Everything under tests/integration drives the real engine or real local hosts.

Tests marked `kubernetes` need the kubernetes provider plugin and the local cluster's binaries,
built from Go modules (20-30 min cold). scripts/test starts that build in the background, so
these tests run last (those of modules that never start the cluster first: the provider builds
first) and wait for it (the build's own locks: `kube_cluster` below, and
localhosts/engine.py::repo_stack for a stack that declares a fleet), while the others run
meanwhile.
"""

import pytest

from localhosts.kube import kubebuild
from tests.support.kube import session_cluster


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
    # The kubernetes tests of modules that never start the cluster need only the provider plugin,
    # which builds first: they run while the cluster's binaries build. Whole modules move, so a
    # module's scenario keeps its order and its module fixtures are set up once.
    on_cluster = {item.path for item in items if "kube_cluster" in item.fixturenames}
    # A test that stops the cluster waits until no other session uses it: it goes last, alone.
    # Stable: the order within each group stays the files' order.
    items.sort(key=lambda item: (item.get_closest_marker("kubernetes") is not None,
                                 item.path in on_cluster,
                                 item.get_closest_marker("sole_cluster") is not None))


@pytest.fixture(scope="session")
def kube_cluster():
    """The session's local Kubernetes cluster (tests/support/kube.py)."""
    kubebuild.ensure_all()
    with session_cluster() as info:
        yield info
