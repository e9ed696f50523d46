"""The gateway's receipts (spear/receipts.py says what they are for): LiteLLM's response-headers
hook signs an answer when the request asks for a receipt, as scripts/gate does, and its
streaming iterator hook closes such a stream with a receipt of its timings.

config.yaml names `spear_gateway.receipts.receipt_signer`: LiteLLM 1.91.1 loads this file by
path (see callbacks.py), a module of its own, which is harmless here as the signer keeps no
state; and it needs none of the hatch's settings.

`async_post_call_response_headers_hook` (custom_logger.py 1.91.1 l.368, 1.108.7 l.446) is
awaited on every successful call with the request's data, the key, the response and the
request's headers (proxy/utils.py post_call_response_headers_hook, 1.91.1 l.2327, 1.108.7
l.4350); what it returns is added to the answer's headers. A non-streamed answer is the final
response object (after the success hooks), so the signature covers what the client reads; a
stream's headers leave before its text, so its receipt covers the request only. Only on request
(`x-spear-receipt` in the request's headers): a harness's request carries its whole context,
and nobody reads its receipt.

The deployment's track is its model_info's `spear_track`, read from the router by the model id
that served (Router.get_deployment, both versions); the version is the installed package's, so
it is what answered, whatever the stack says it installed. What the answering pod runs comes
from the address LiteLLM called (the response's hidden `api_base`, the pod the prefix-affinity
hook picked) and the pods' last listing (spear_gateway/pods.py); "" when the Service's address
was called, as kube-proxy then picked a pod nobody here can name.

A stream's closing receipt: the iterator hook (chained after the hatch's, as config.yaml lists
the callbacks) times each chunk carrying output against `proxy_server_request.arrival_time`,
LiteLLM's wall-clock stamp of the request's arrival (litellm_pre_call_utils.py, both versions),
and at the end yields the SSE comment as bytes: proxy_server.py's async_data_generator passes a
bytes chunk that starts with ':' to the client as it is (1.91.1 l.6931, 1.108.7 l.10168).
"""

from __future__ import annotations

import json
import os
import time
from importlib.metadata import version
from typing import Any

from litellm import ModelResponse
from litellm.integrations.custom_logger import CustomLogger

from spear_gateway.pods import running_at
from spear_gateway.tenancy import TRACK, model_info
from spear.receipts import HEADER, STREAM_COMMENT, carries_output, receipt_key, sign, sign_stream

LITELLM_VERSION = version("litellm")


def _track(model_id: str) -> str:
    from litellm.proxy.proxy_server import llm_router  # set once the proxy has its config

    deployment = llm_router.get_deployment(model_id=model_id) if llm_router and model_id else None
    return str(model_info(deployment).get(TRACK) or "")


def _delta(chunk: Any) -> Any:
    choices = getattr(chunk, "choices", None) or [None]
    delta = getattr(choices[0], "delta", None)
    return delta.model_dump() if hasattr(delta, "model_dump") else delta


class ReceiptSigner(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        master_key = os.environ.get("LITELLM_MASTER_KEY")
        # Without a master key LiteLLM serves unauthenticated and nobody could check a receipt.
        self._key = receipt_key(master_key) if master_key else None

    async def async_post_call_response_headers_hook(
            self, data: dict, user_api_key_dict: Any, response: Any,
            request_headers: dict[str, str] | None = None,
            litellm_call_info: dict[str, Any] | None = None) -> dict[str, str] | None:
        asked = {k.lower() for k in (request_headers or {})}
        if self._key is None or response is None or HEADER not in asked:
            return None
        hidden = getattr(response, "_hidden_params", None) or {}
        served_by = str((litellm_call_info or {}).get("model_id") or hidden.get("model_id") or "")
        answer = response.model_dump() if isinstance(response, ModelResponse) else None
        receipt = sign(self._key, str(data.get("litellm_call_id", "")),
                       getattr(user_api_key_dict, "key_alias", None) or "",
                       str(data.get("model", "")), served_by, _track(served_by),
                       running_at(hidden.get("api_base")), LITELLM_VERSION,
                       data.get("messages"), answer)
        return {HEADER: json.dumps(receipt.to_json(), separators=(",", ":"), sort_keys=True)}

    async def async_post_call_streaming_iterator_hook(self, user_api_key_dict: Any, response: Any,
                                                      request_data: dict):
        arrival = request_data.get("proxy_server_request") or {}
        asked = {k.lower() for k in arrival.get("headers") or {}}
        if self._key is None or HEADER not in asked:
            async for chunk in response:
                yield chunk
            return
        arrived = arrival.get("arrival_time") or time.time()
        chunks: list[float] = []
        text: list[str] = []
        async for chunk in response:
            delta = _delta(chunk)
            if carries_output(delta):
                chunks.append(round(time.time() - arrived, 6))
                text.append(delta.get("content") or "")
            yield chunk
        receipt = sign_stream(self._key, str(request_data.get("litellm_call_id", "")), chunks,
                              "".join(text))
        yield (STREAM_COMMENT + json.dumps(receipt.to_json(), separators=(",", ":"),
                                           sort_keys=True) + "\n\n").encode()


receipt_signer = ReceiptSigner()
