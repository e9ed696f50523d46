"""The throughput re-measure (spear/throughput.py, components/vllm_fleet/throughput.py): rates
are medians of timed rounds from the server's own token counts; a change of the pair measures
again and compares with the last; below throughputMinRatio it fails the update naming both
pairs and numbers, and without the setting it only records. The endpoint here is a host whose
answers take a set time per token (the real endpoint's measurement is in
tests/integration/test_vllm_fleet_on_kubernetes.py)."""

from __future__ import annotations

import contextlib
import json

import pytest

from components.hostops.ssh import RemoteError
from components.vllm_fleet import throughput as resource
from spear import throughput


def test_rates_are_medians_and_decode_excludes_the_first_tokens_time():
    rounds = [throughput.Round(prefill_tokens=100, prefill_seconds=s, decode_tokens=65,
                               decode_seconds=1.0 + s, first_token_seconds=s)
              for s in (0.5, 0.25, 1.0)]
    assert throughput.rates(rounds) == {"prefill_tokens_per_second": 200.0,
                                        "decode_tokens_per_second": 64.0}


def test_a_round_that_took_no_time_is_an_error_not_infinity():
    with pytest.raises(ValueError, match="no usable round"):
        throughput.rates([throughput.Round(100, 0.0, 65, 0.1, 0.2)])


NOW = {"prefill_tokens_per_second": 500.0, "decode_tokens_per_second": 30.0}
LAST = {"prefill_tokens_per_second": 1000.0, "decode_tokens_per_second": 32.0}


def test_a_drop_below_the_ratio_fails_naming_the_rate_both_numbers_and_both_pairs():
    problem = throughput.drop_problem(NOW, LAST, {"image": "vllm:v0.24.0"}, {"image": "vllm:v0.25.0"},
                                      0.8)
    assert "prefill 500 tokens/s is 0.5 of the last 1000" in problem
    assert "decode" not in problem  # 30 of 32 is above 0.8
    assert "v0.24.0" in problem and "v0.25.0" in problem


def test_within_the_ratio_or_without_one_or_without_a_last_measurement_nothing_fails():
    assert throughput.drop_problem(NOW, LAST, "a", "b", 0.5) is None
    assert throughput.drop_problem(NOW, LAST, "a", "b", None) is None
    assert throughput.drop_problem(NOW, None, None, "b", 0.8) is None
    assert throughput.compared(NOW, LAST) == {"prefill_tokens_per_second": 0.5,
                                              "decode_tokens_per_second": 0.938}


class TimedHost:
    """Answers chat completions after a set time per prompt and per generated token."""

    def __init__(self, prefill_seconds_per_token: float, decode_seconds_per_token: float,
                 window: int = 10**6):
        self.prefill, self.decode, self.window = (prefill_seconds_per_token,
                                                  decode_seconds_per_token, window)
        self.bodies: list[dict] = []
        self.clock = 0.0  # seconds: each answer advances it by its modelled time, never sleeps

    def monotonic(self) -> float:
        return self.clock

    def http_exchange(self, port, method, path, body, address, timeout, headers):
        request = json.loads(body)
        self.bodies.append(request)
        prompt = len(request["messages"][0]["content"].split())
        completion = request["max_tokens"]
        if prompt + completion > self.window:  # as llama-server says it
            return 400, {}, (b'{"error":{"code":400,"message":"request exceeds the available'
                             b' context size, try increasing it"}}')
        self.clock += prompt * self.prefill + completion * self.decode
        return 200, {}, json.dumps({"usage": {"prompt_tokens": prompt,
                                              "completion_tokens": completion}}).encode()


def provider_with(monkeypatch, host):
    # The provider times each request by the host's clock: the rates are exact, whatever the
    # machine's load (a sleeping stand-in was off by 30% on a busy CI machine).
    monkeypatch.setattr(resource, "time", host)
    monkeypatch.setattr(resource, "vantage", lambda props: contextlib.nullcontext(host))
    return resource.FleetThroughputProvider()


PROPS = {"connection": {"host": "gateway"}, "address": "10.96.100.10", "port": 8000,
         "model": "coder", "max_model_len": 4096, "pair": {"image": "vllm:v0.24.0"},
         "api_key": "sk-vllm", "min_ratio": 0.8}


def test_it_measures_each_rate_from_timed_requests_and_records_no_previous_at_first(monkeypatch):
    host = TimedHost(prefill_seconds_per_token=0.0005, decode_seconds_per_token=0.002)
    outs = provider_with(monkeypatch, host).apply(dict(PROPS), olds=None)
    # 257 prompt words at 0.5 ms each and one token at 2 ms; 63 tokens at 2 ms each.
    assert outs["prefill_tokens_per_second"] == pytest.approx(257 / (257 * 0.0005 + 0.002), rel=1e-6)
    assert outs["decode_tokens_per_second"] == pytest.approx(1 / 0.002, rel=1e-6)
    assert (outs["previous"], outs["ratios"]) == (None, None)
    assert any(body.get("ignore_eos") for body in host.bodies)


def test_a_slower_engine_after_a_pair_change_fails_the_update(monkeypatch):
    fast = provider_with(monkeypatch, TimedHost(0.0001, 0.001)).apply(dict(PROPS), olds=None)
    slower = provider_with(monkeypatch, TimedHost(0.0001, 0.004))
    with pytest.raises(RemoteError, match=r"decode .* tokens/s is 0\.\d+ of the last"):
        slower.apply({**PROPS, "pair": {"image": "vllm:v0.25.0"}}, olds=fast)


def test_a_change_within_the_ratio_passes_and_records_the_last_and_the_ratios(monkeypatch):
    first = provider_with(monkeypatch, TimedHost(0.0001, 0.002)).apply(dict(PROPS), olds=None)
    again = provider_with(monkeypatch, TimedHost(0.0001, 0.002)).apply(
        {**PROPS, "pair": {"image": "vllm:v0.25.0"}, "min_ratio": 0.5}, olds=first)
    assert again["previous"] == {rate: first[rate] for rate in throughput.RATES}
    assert set(again["ratios"]) == set(throughput.RATES)


def test_only_a_change_of_what_is_measured_measures_again():
    diff = resource.FleetThroughputProvider().diff("id", {**PROPS, **NOW}, dict(PROPS))
    assert not diff.changes  # the recorded rates are outputs, not a change
    assert resource.FleetThroughputProvider().diff(
        "id", PROPS, {**PROPS, "pair": {"image": "vllm:v0.25.0"}}).changes


def test_a_server_whose_window_per_request_is_smaller_gets_the_longest_prompt_it_takes(monkeypatch):
    host = TimedHost(0.0001, 0.001, window=100)  # 4096 served, 100 per request (split slots)
    outs = provider_with(monkeypatch, host).apply(dict(PROPS), olds=None)
    prompts = [len(b["messages"][0]["content"].split()) for b in host.bodies if b["max_tokens"] == 1
               and "Summarise" in b["messages"][0]["content"]]
    # 256 words are refused, then 128; 64 are taken, and every round is measured with them.
    assert prompts == [257, 129, 65, 65, 65, 65]  # (the words and the instruction)
    assert outs["prefill_tokens_per_second"] > 0


def test_another_refusal_is_not_taken_for_a_short_window():
    assert throughput.shorter_prompt(256, 400, b'{"error": "context size exceeded"}') == 128
    assert throughput.shorter_prompt(256, 401, b"Unauthorized") is None
    assert throughput.shorter_prompt(16, 400, b"context") is None  # as short as it gets
