"""The gateway host's HTTPS listener (gateway.listen.tls): the same LiteLLM app, in the same
process, served with TLS on the declared address beside the loopback HTTP LiteLLM's CLI binds.

Why here: LiteLLM's CLI runs one uvicorn server on one address, with TLS on all of it or on none,
and loopback must stay plain HTTP for the host's own callers (health, keys, smoke tests). A
second process would split the hooks' in-flight state and the metrics between two registries.
LiteLLM imports this package inside its startup, on its event loop, so one more uvicorn server
for the same app starts there: lifespan off (the app's startup is the one running), signals
left to the main server (whose shutdown ends the loop and this task with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping

from spear.rules import TLS_CERTIFICATE_ENV, TLS_KEY_ENV, TLS_LISTEN_ENV

log = logging.getLogger("spear_gateway")
_started: list[asyncio.Task] = []  # one listener per process, however often the hooks load


def start(environ: Mapping[str, str] = os.environ) -> asyncio.Task | None:
    """Serve LiteLLM's app over HTTPS where TLS_LISTEN_ENV says; None when it says nowhere."""
    listen = environ.get(TLS_LISTEN_ENV)
    if not listen or _started:
        return _started[0] if _started else None
    address, _, port = listen.rpartition(":")
    missing = [name for name in (TLS_CERTIFICATE_ENV, TLS_KEY_ENV) if not environ.get(name)]
    if not address or not port.isdigit() or missing:
        raise ValueError(f"spear_gateway: {TLS_LISTEN_ENV}={listen!r} needs address:port and"
                         f" {', '.join((TLS_CERTIFICATE_ENV, TLS_KEY_ENV))} (missing: {missing})")
    import uvicorn
    from litellm.proxy.proxy_server import app

    class Listener(uvicorn.Server):
        def capture_signals(self) -> contextlib.AbstractContextManager[None]:
            return contextlib.nullcontext()

    server = Listener(uvicorn.Config(app, host=address, port=int(port), lifespan="off",
                                     ssl_certfile=environ[TLS_CERTIFICATE_ENV],
                                     ssl_keyfile=environ[TLS_KEY_ENV], log_config=None))
    task = asyncio.get_running_loop().create_task(server.serve(), name="spear-tls-listener")
    task.add_done_callback(_ended)
    _started.append(task)
    log.info("spear_gateway: HTTPS on %s", listen)
    return task


def _ended(task: asyncio.Task) -> None:
    # A listener that cannot bind (uvicorn exits with SystemExit) must not leave the gateway
    # serving loopback alone as if nothing happened: the unit restarts and says why.
    if not task.cancelled() and task.exception() is not None:
        log.error("spear_gateway: the HTTPS listener stopped: %r", task.exception())
        os._exit(1)
