"""The one way a step waits for something to hold: the resources on a host or cluster, the local
hosts and clusters, and the tests' servers all poll with it."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout: float, interval: float = 1.0) -> bool:
    """Asks predicate() every `interval` seconds until it answers true (True) or `timeout`
    seconds have passed (False); it is asked at least once. To fail early (what is waited for
    has died, say), the predicate raises."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
