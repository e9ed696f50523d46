"""The program's last step: let the engine's registrations start before the Python SDK waits for
them.

The SDK (pulumi 3.272.0, runtime/stack.py `wait_for_rpcs`) awaits the registrations one by one,
cheaply, only if one has started when the program returns. A program's code is synchronous, so
none has: each `register_resource` is a task that has not run yet. Every registration then
finishes in the wait's second phase, which puts a callback on every pending output each time
one output ends: quadratic in the stack's size (`scripts/bench-preview`, docs/BENCHMARKS.md).
An async entrypoint (`pulumi.run`, awaited after the module's code and before that wait) that
yields to the event loop once lets every scheduled registration start first.
"""

from __future__ import annotations

import asyncio

import pulumi


async def _yield_once() -> None:
    await asyncio.sleep(0)


def start_before_the_wait() -> None:
    """Call once, after the program has declared its resources."""
    pulumi.run(_yield_once)
