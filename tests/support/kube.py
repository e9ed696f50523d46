"""The machine's one local Kubernetes cluster (localhosts/kube/kubecluster.py: one real node per machine)
for a test session, shared by every test that needs one (the `kube_cluster` fixture in
tests/integration/conftest.py). The session starts it unless it runs already (the local stack's,
left as it is, since tests work in namespaces of their own) and stops it at the end if it started
it, which also restores what the node changed on the machine."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from components.hostops.waiting import wait_until
from localhosts.kube.kubecluster import (LOCAL_CLUSTER, ClusterInfo, KubeClient, cluster_status, start_cluster,
                                    stop_cluster)
from localhosts.images.serving_image import ensure_image


@contextlib.contextmanager
def session_cluster() -> Iterator[ClusterInfo]:
    running = cluster_status(LOCAL_CLUSTER)
    info = start_cluster(LOCAL_CLUSTER, images=[ensure_image().archive])
    try:
        yield info
    finally:
        if running is None:
            stop_cluster(LOCAL_CLUSTER)


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
