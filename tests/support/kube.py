"""One local Kubernetes cluster per test session (localhosts/kubecluster.py), shared by every test
that needs one (the `kube_cluster` fixture in tests/integration/conftest.py) and stopped when the
session ends. Each session holds a lock on its port slot, so two sessions on one machine (or a
session and the local stack's cluster on slot 0) never share ports or a cluster."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator

from localhosts.kubecluster import LOCAL_SLOT, ClusterInfo, ClusterPorts, FakeNodes, start_cluster, stop_cluster
from spear.cache import cache_dir

# Two nodes, so a test can see pods spread or a node filled up.
SESSION_NODES = FakeNodes(count=2)


@contextlib.contextmanager
def session_cluster() -> Iterator[ClusterInfo]:
    """A fresh cluster (empty etcd) on the first free slot other than the local stack's."""
    locks = cache_dir() / "kubecluster"
    locks.mkdir(parents=True, exist_ok=True)
    for slot in (n for n in range(ClusterPorts.SLOTS) if n != LOCAL_SLOT):
        with open(locks / f"slot-{slot}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another session's
            name = f"test-{slot}"
            stop_cluster(name)  # left running by a session that was killed
            if ClusterPorts.slot(slot).taken():
                continue  # something else listens there
            info = start_cluster(name, ClusterPorts.slot(slot), SESSION_NODES, fresh=True)
            try:
                yield info
            finally:
                stop_cluster(name)
            return
    raise RuntimeError(f"no free Kubernetes port slot among 0-{ClusterPorts.SLOTS - 1} for this test session")
