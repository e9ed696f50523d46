"""The gateway's receipts (spear/receipts.py says what they are for): LiteLLM's response-headers
hook signs an answer when the request asks for a receipt, as scripts/gate does.

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
"""

from __future__ import annotations

import json
import os
from typing import Any

from litellm import ModelResponse
from litellm.integrations.custom_logger import CustomLogger

from spear.receipts import HEADER, receipt_key, sign


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
        served_by = (litellm_call_info or {}).get("model_id") or hidden.get("model_id") or ""
        answer = response.model_dump() if isinstance(response, ModelResponse) else None
        receipt = sign(self._key, str(data.get("litellm_call_id", "")),
                       getattr(user_api_key_dict, "key_alias", None) or "",
                       str(data.get("model", "")), str(served_by), data.get("messages"), answer)
        return {HEADER: json.dumps(receipt.to_json(), separators=(",", ":"), sort_keys=True)}


receipt_signer = ReceiptSigner()
