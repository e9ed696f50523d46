"""The machine's one local Kubernetes cluster (localhosts/kube/kubecluster.py: one real node per machine)
for a test session, shared by every test that needs one (the `kube_cluster` fixture in
tests/integration/conftest.py). The session starts it unless it runs already (the local stack's,
left as it is, since tests work in namespaces of their own).

Sessions may share it side by side (two pytests on one machine): each holds the
users lock shared while it uses the cluster, and the last one out stops it if a test session
started it, which also restores what the node changed on the machine. A test that stops the
cluster itself takes the lock alone (`sole_use`)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from components.hostops.waiting import wait_until
from localhosts.kube.kubecluster import (LOCAL_CLUSTER, ClusterInfo, KubeClient, cluster_status, start_cluster,
                                    state_dir, stop_cluster)
from localhosts.images.serving_image import ensure_image

_users: IO | None = None  # this session's hold on the users lock


def _marker() -> Path:
    """The process group of the cluster a test session started (not the local stack's one)."""
    return state_dir(LOCAL_CLUSTER) / "started-by-tests"


def _ours(info: ClusterInfo | None) -> bool:
    """A test session started `info` (None: no cluster runs, and a marker says one did)."""
    mark = _marker()
    return mark.exists() and (info is None or mark.read_text() == str(info.pgid))


def _running(mark: bool | None = None) -> ClusterInfo:
    """The cluster, started unless it runs. Marked as the tests' when this started it, or as `mark`
    says."""
    with open(state_dir(LOCAL_CLUSTER) / "start.lock", "a") as start:
        fcntl.flock(start, fcntl.LOCK_EX)  # two sessions starting at once: one starts, one waits
        started = cluster_status(LOCAL_CLUSTER) is None
        info = start_cluster(LOCAL_CLUSTER, images=[ensure_image().archive])
        if started if mark is None else mark:
            _marker().write_text(str(info.pgid))
        return info


@contextlib.contextmanager
def session_cluster() -> Iterator[ClusterInfo]:
    global _users
    state_dir(LOCAL_CLUSTER).mkdir(parents=True, exist_ok=True)
    with open(state_dir(LOCAL_CLUSTER) / "users.lock", "a") as users:
        # Shared before the start: a session that has the cluster alone is then never joined.
        fcntl.flock(users, fcntl.LOCK_SH)
        _users = users
        try:
            yield _running()
        finally:
            _users = None
            fcntl.flock(users, fcntl.LOCK_UN)
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another session uses it still: the last one out stops it
            else:
                if _ours(cluster_status(LOCAL_CLUSTER)):
                    stop_cluster(LOCAL_CLUSTER)
                    _marker().unlink()


@contextlib.contextmanager
def sole_use() -> Iterator[ClusterInfo]:
    """The session's cluster with no other session using it, for a test that stops it: waits
    until the others have left, and leaves it running again (still the tests' if it was)."""
    if _users is None:
        raise RuntimeError("sole_use needs the kube_cluster fixture's session")
    fcntl.flock(_users, fcntl.LOCK_UN)  # a lock held shared here would keep this one waiting
    fcntl.flock(_users, fcntl.LOCK_EX)
    try:
        info = _running()  # the last other session out may have stopped it
        ours = _ours(info)
        try:
            yield info
        finally:
            _running(mark=ours)
    finally:
        fcntl.flock(_users, fcntl.LOCK_SH)


def clear(client: KubeClient, namespaces: list[str], volumes: list[str] = (), timeout: float = 120) -> None:
    """Delete what a killed test run left in the shared cluster (its namespaces, its cluster-scoped
    volumes), and wait until they are gone."""
    paths = [*(f"/api/v1/namespaces/{n}" for n in namespaces),
             *(f"/api/v1/persistentvolumes/{v}" for v in volumes)]
    for path in paths:
        client.request("DELETE", path)
    left = paths

    def gone() -> bool:
        nonlocal left
        left = [p for p in left if client.get(p) is not None]
        return not left

    if not wait_until(gone, timeout):
        raise RuntimeError(f"still there after {timeout} s: {', '.join(left)}")
