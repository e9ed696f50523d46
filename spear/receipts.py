"""Receipts: the gateway signs each answer it gives, so a gate record's evidence can only hold
answers the gateway really gave (spear/rollout_gate.py::receipt_problems checks them).

Without them, evidence is a text file: whoever writes a record can write answers that pass
every check and the evidence's sha256 beside them. With them, an evidence line stands only with
the header the gateway sent on that answer, `x-spear-receipt`: who asked (the key's alias),
which route they asked for, which deployment served it, LiteLLM's id of the call, and an
HMAC-SHA256 over those and the request's messages and the answer's text and tool calls.

The HMAC key is derived from the gateway's master key, which the gateway and the config check
both hold and a record's author need not: the derivation keeps the master key itself out of any
other use, and a receipt says nothing about it. A streamed answer's header leaves before its
text, so a stream's receipt covers the request, not its chunks or their timings.

Pure and stdlib only: the gateway (spear_gateway/receipts.py) signs with it, the config check
verifies with it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

HEADER = "x-spear-receipt"
_CONTEXT = b"spear-fleet answer receipt v1"


def receipt_key(master_key: str) -> bytes:
    return hmac.new(master_key.encode(), _CONTEXT, hashlib.sha256).digest()


@dataclass(frozen=True)
class Receipt:
    call_id: str  # LiteLLM's id of the call: a receipt is used by one evidence line only
    who: str  # the key's alias ("" for the master key)
    route: str  # the model name the request asked for
    served_by: str  # the deployment that answered (its model id)
    signature: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @property
    def identity(self) -> tuple[str, str, str]:
        """Who asked which route and which deployment answered: one per track of a gate run."""
        return (self.who, self.route, self.served_by)


def receipt_from_json(value: Any) -> Receipt:
    """A receipt as the header or an evidence line carries it; ValueError when it is not one."""
    if not isinstance(value, Mapping) or set(value) != {"call_id", "who", "route", "served_by",
                                                         "signature"} \
            or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"not a receipt: {value!r}")
    return Receipt(**value)


def answer_parts(answer: Any) -> tuple[Any, list[list[str]]]:
    """(the first choice's text, [[name, arguments] per tool call]) of an OpenAI answer as JSON;
    (None, []) for anything else (a stream's receipt is made before its answer)."""
    choices = answer.get("choices") if isinstance(answer, Mapping) else None
    message = (choices[0] or {}).get("message") if isinstance(choices, list) and choices else None
    if not isinstance(message, Mapping):
        return None, []
    calls = [[str((call.get("function") or {}).get("name")),
              str((call.get("function") or {}).get("arguments"))]
             for call in message.get("tool_calls") or [] if isinstance(call, Mapping)]
    return message.get("content"), calls


def _signed(key: bytes, call_id: str, who: str, route: str, served_by: str, messages: Any,
            answer: Any) -> str:
    content, calls = answer_parts(answer)
    text = json.dumps({"callId": call_id, "who": who, "route": route, "servedBy": served_by,
                       "messages": messages, "content": content, "toolCalls": calls},
                      sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def sign(key: bytes, call_id: str, who: str, route: str, served_by: str, messages: Any,
         answer: Any) -> Receipt:
    return Receipt(call_id, who, route, served_by,
                   _signed(key, call_id, who, route, served_by, messages, answer))


def verifies(key: bytes, receipt: Receipt, messages: Any, answer: Any) -> bool:
    expected = _signed(key, receipt.call_id, receipt.who, receipt.route, receipt.served_by,
                       messages, answer)
    return hmac.compare_digest(expected, receipt.signature)
