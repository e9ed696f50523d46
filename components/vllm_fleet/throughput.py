"""The throughput re-measure after an engine change: `FleetThroughput` measures one track's
prefill and decode tokens/s on the live endpoint (spear/throughput.py: the requests and the
arithmetic) whenever the track's pair (engine image, model, revision) changes, from where the
track's proof runs, and compares them with its last measurement, which its state keeps. With
vllmFleet.observability.throughputMinRatio set, a rate below that share of the last fails the
`up` (the pods have rolled: roll back, or accept the new rate by lowering the ratio); without,
the ratios are only recorded.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pulumi

from components.hostops.host_resource import CheckProvider, HostResource
from components.hostops.kube_api import vantage, vantage_name
from components.hostops.ssh import RemoteError, bearer_headers
from review.kinds import IN_PLACE, Kind
from spear import throughput, tokens

OUTPUTS = (*throughput.RATES, "previous", "ratios")


@dataclass
class FleetThroughputArgs:
    connection: pulumi.Input[dict]  # the host the track's proof runs from
    address: pulumi.Input[str]  # the track's Service
    port: int
    model: str
    max_model_len: int
    pair: dict[str, Any]  # a change re-measures
    api_key: pulumi.Input[str] | None = None  # vLLM's (secret)
    min_ratio: float | None = None  # observability.throughputMinRatio


class FleetThroughputProvider(CheckProvider):
    update_fields = ("pair", "address", "port", "model", "max_model_len", "min_ratio")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{vantage_name(props)}:{props['address']}:{props['port']}:throughput"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        headers = bearer_headers(props.get("api_key"))

        def post(host: Any, body: dict[str, Any]) -> tuple[int, bytes, float]:
            started = time.monotonic()
            status, _, answer = host.http_exchange(
                int(props["port"]), "POST", "/v1/chat/completions", json.dumps(body).encode(),
                address=props["address"], timeout=300, headers=headers)
            return status, answer, time.monotonic() - started

        def timed(host: Any, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
            status, answer, seconds = post(host, body)
            if status != 200:
                raise RemoteError(f"throughput: HTTP {status} from {props['address']}:"
                                  f" {answer[:300]!r}")
            return json.loads(answer), seconds

        model = props["model"]
        rounds = []
        with vantage(props) as host:
            words = throughput.prefill_words(int(props["max_model_len"]))
            while True:  # the longest prompt the server's window per request takes
                status, answer, _ = post(host, throughput.prefill_body(model, words))
                if status == 200 or (shorter := throughput.shorter_prompt(words, status, answer)) is None:
                    break
                words = shorter
            for _ in range(throughput.ROUNDS):
                long, prefill_s = timed(host, throughput.prefill_body(model, words))
                short, first_s = timed(host, throughput.decode_body(model, max_tokens=1))
                decoded, decode_s = timed(host, throughput.decode_body(model))
                rounds.append(throughput.Round(
                    prefill_tokens=throughput.usage(long)[0], prefill_seconds=prefill_s,
                    decode_tokens=throughput.usage(decoded)[1], decode_seconds=decode_s,
                    first_token_seconds=first_s))
        try:
            now = throughput.rates(rounds)
        except ValueError as err:
            raise RemoteError(str(err)) from None
        last = {rate: olds.get(rate) for rate in throughput.RATES} if olds else None
        problem = throughput.drop_problem(now, last, (olds or {}).get("pair"), props["pair"],
                                          props.get("min_ratio"))
        if problem:
            raise RemoteError(f"{problem}; the pods have rolled: roll back, or accept the new"
                              " rate by lowering throughputMinRatio")
        return {**props, **now, "previous": last if last and all(last.values()) else None,
                "ratios": throughput.compared(now, last)}


KIND = Kind.of(tokens.FLEET_THROUGHPUT, "fleet throughput", IN_PLACE, meanings={
    IN_PLACE: "measures the track's prefill and decode tokens/s again and compares them with the"
              " last measurement"})

class FleetThroughput(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.FLEET_THROUGHPUT.name):
    prefill_tokens_per_second: pulumi.Output[float]
    decode_tokens_per_second: pulumi.Output[float]
    previous: pulumi.Output[Any]
    ratios: pulumi.Output[Any]

    def __init__(self, name: str, args: FleetThroughputArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            FleetThroughputProvider(), name,
            {"connection": args.connection, "address": args.address, "port": args.port,
             "model": args.model, "max_model_len": args.max_model_len, "pair": args.pair,
             "api_key": args.api_key, "min_ratio": args.min_ratio},
            opts, outputs=OUTPUTS, secret_inputs=("api_key",))
