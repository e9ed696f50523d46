"""Receipts: the gateway signs each answer it gives, so a gate record's evidence can only hold
answers the gateway really gave (spear/rollout_gate.py::receipt_problems checks them).

Without them, evidence is a text file: whoever writes a record can write answers that pass
every check and the evidence's sha256 beside them. With them, an evidence line stands only with
the header the gateway sent on that answer, `x-spear-receipt`: who asked (the key's alias),
which route they asked for, which deployment served it and the fleet track that deployment is
(its `spear_track`), what the fleet pod that answered runs (where the gateway picked the pod),
the LiteLLM version that answered, LiteLLM's id of the call, and an HMAC-SHA256 over those and
the request's messages and the answer's text and tool calls. So a record cannot claim another
pair or gateway version than the ones that answered, nor count stable's answers as the
canary's.

The HMAC key is derived from the gateway's master key, which the gateway and the config check
both hold and a record's author need not: the derivation keeps the master key itself out of any
other use, and a receipt says nothing about it. A streamed answer's header leaves before its
text, so its header's receipt covers the request; the gateway closes the stream with an SSE
comment (`: x-spear-receipt {...}`, which OpenAI clients skip) that signs the text it sent and
when it sent each chunk carrying output, in seconds after the request reached it. A client's
own timings start earlier (before it connects), so one that says a chunk came sooner than the
gateway sent it was edited.

Pure and stdlib only: the gateway (spear_gateway/receipts.py) signs with it, the config check
verifies with it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
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
    track: str  # that deployment's fleet track (its model_info's spear_track), "" for none
    serves: str  # what the fleet pod that answered runs (`serving`); "" when no pod was picked
    gateway: str  # the LiteLLM version that answered
    signature: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """Who asked which route and which deployment (of which track) answered: one per side
        of a gate run."""
        return (self.who, self.route, self.served_by, self.track)


def receipt_from_json(value: Any) -> Receipt:
    """A receipt as the header or an evidence line carries it; ValueError when it is not one."""
    return _from_json(Receipt, value)


def _from_json(kind: type, value: Any) -> Any:
    fields = set(kind.__dataclass_fields__)
    if not isinstance(value, Mapping) or set(value) != fields \
            or not all(isinstance(value[f], str) for f in fields - {"chunks"}):
        raise ValueError(f"not a {kind.__name__}: {value!r}")
    return kind(**value)


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


def _mac(key: bytes, signed: Mapping[str, Any]) -> str:
    text = json.dumps(signed, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _answer_signed(receipt: Receipt, messages: Any, answer: Any) -> dict[str, Any]:
    content, calls = answer_parts(answer)
    return {**receipt.to_json(), "signature": None, "messages": messages, "content": content,
            "toolCalls": calls}


def serving(tag: str, model: str, revision: str) -> str:
    """What a fleet pod runs, as a receipt signs it: its engine version (image tag), model and
    revision (spear/rollout_gate.py's Pair)."""
    return f"{tag} {model} {revision}"


def sign(key: bytes, call_id: str, who: str, route: str, served_by: str, track: str,
         serves: str, gateway: str, messages: Any, answer: Any) -> Receipt:
    unsigned = Receipt(call_id, who, route, served_by, track, serves, gateway, "")
    return replace(unsigned, signature=_mac(key, _answer_signed(unsigned, messages, answer)))


def verifies(key: bytes, receipt: Receipt, messages: Any, answer: Any) -> bool:
    return hmac.compare_digest(_mac(key, _answer_signed(receipt, messages, answer)),
                               receipt.signature)


# --- a stream's closing receipt -----------------------------------------------------------------

STREAM_COMMENT = f": {HEADER} "  # the SSE comment line that carries it, before its JSON


def carries_output(delta: Any) -> bool:
    """Whether a streamed chunk's delta carries output: the chunks whose times are a stream's
    TTFT and inter-token latency, for the gateway and for the gate alike."""
    return isinstance(delta, Mapping) and bool(delta.get("content") or delta.get("tool_calls"))


@dataclass(frozen=True)
class StreamReceipt:
    call_id: str  # the call of the header's receipt
    chunks: list[float]  # seconds after the request reached the gateway, per chunk with output
    signature: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def stream_receipt_from_json(value: Any) -> StreamReceipt:
    """A closing receipt as the comment carries it; ValueError when it is not one."""
    found = _from_json(StreamReceipt, value)
    if not isinstance(found.chunks, list) or not all(
            isinstance(c, (int, float)) and not isinstance(c, bool) for c in found.chunks):
        raise ValueError(f"not a StreamReceipt: {value!r}")
    return found


def _stream_signed(call_id: str, chunks: list[float], text: str) -> dict[str, Any]:
    return {"callId": call_id, "chunks": chunks, "text": text}


def sign_stream(key: bytes, call_id: str, chunks: list[float], text: str) -> StreamReceipt:
    return StreamReceipt(call_id, chunks, _mac(key, _stream_signed(call_id, chunks, text)))


def stream_verifies(key: bytes, receipt: StreamReceipt, text: str) -> bool:
    return hmac.compare_digest(_mac(key, _stream_signed(receipt.call_id, receipt.chunks, text)),
                               receipt.signature)
