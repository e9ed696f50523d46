"""A request's worst case bounds what it can cost; its usage prices what it did cost."""

from types import SimpleNamespace

from spear_gateway.pricing import (Prices, StreamedUsage, output_limit, prompt_tokens_upper_bound,
                                   usage_of, usage_usd, worst_case_usd)

PRICES = Prices(input=0.000001, output=0.00001)


def test_the_prompt_bound_is_at_least_one_token_per_byte_of_every_prompt_part():
    text = "ünïcode " * 50
    body = {"messages": [{"role": "user", "content": text}], "tools": [{"name": "read_file"}]}
    assert prompt_tokens_upper_bound(body) >= len(text.encode()) + len("read_file")
    assert prompt_tokens_upper_bound(body) > prompt_tokens_upper_bound({"messages": body["messages"]})


def test_the_output_limit_is_the_smallest_one_the_request_sets():
    assert output_limit({"max_tokens": 100, "max_completion_tokens": 50}) == 50
    assert output_limit({"max_output_tokens": 7}) == 7
    assert output_limit({"max_tokens": True}) is None
    assert output_limit({}) is None


def test_the_worst_case_prices_the_limit_at_the_output_price_and_the_prompt_at_the_input_price():
    body = {"messages": [{"role": "user", "content": "hi"}]}
    expected = prompt_tokens_upper_bound(body) * PRICES.input + 7 * PRICES.output
    assert worst_case_usd(body, PRICES, 7) == expected
    assert worst_case_usd(body, Prices(0.0, 1.0), 7) == 7.0


def test_usage_is_priced_in_either_dialect():
    cost = 10 * PRICES.input + 2 * PRICES.output
    assert usage_usd({"prompt_tokens": 10, "completion_tokens": 2}, PRICES) == cost
    assert usage_usd({"input_tokens": 10, "output_tokens": 2}, PRICES) == cost
    assert usage_usd(None, PRICES) == 0


def chunk(content=None, tool_calls=None, usage=None):
    """A stream chunk as LiteLLM yields it (attributes, as its ModelResponseStream has)."""
    delta = SimpleNamespace(content=content, tool_calls=tool_calls)
    return SimpleNamespace(choices=[SimpleNamespace(delta=delta)] if usage is None else [],
                           usage=usage)


def test_a_stream_cut_short_is_charged_the_prompt_bound_and_a_token_per_output_chunk():
    streamed = StreamedUsage()
    for part in (chunk(content=""), chunk(content="def"), chunk(tool_calls=[{"index": 0}]),
                 chunk(content=None)):
        streamed.add(part)
    # The role chunk and an empty one carry no output.
    assert streamed.usage(prompt_upper_bound=900) == {"prompt_tokens": 900, "completion_tokens": 2}
    # Never above the hold: the request's worst case at the same bound and its limit.
    assert usage_usd(streamed.usage(900), PRICES) <= worst_case_usd(
        {"messages": [{"role": "user", "content": "x" * 800}]}, PRICES, 2)


def test_usage_a_chunk_reports_is_what_is_charged_and_sse_text_is_counted_too():
    streamed = StreamedUsage()
    streamed.add(chunk(content="a"))
    streamed.add(chunk(usage={"prompt_tokens": 40, "completion_tokens": 5}))
    assert streamed.usage(prompt_upper_bound=900) == {"prompt_tokens": 40, "completion_tokens": 5}
    passed_through = StreamedUsage()
    passed_through.add(b'event: content_block_delta\ndata: {"type": "content_block_delta"}\n\n')
    passed_through.add('data: {"choices": [{"delta": {"content": "x"}}]}\n\n')
    passed_through.add("data: [DONE]\n\n")
    assert passed_through.output_chunks == 2
    assert usage_of({"usage": {"prompt_tokens": 3}}) == {"prompt_tokens": 3} and usage_of(None) == {}
