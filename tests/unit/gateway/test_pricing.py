"""A request's worst case bounds what it can cost; its usage prices what it did cost."""

from spear_gateway.pricing import (Prices, output_limit, prompt_tokens_upper_bound, usage_usd,
                                   worst_case_usd)

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
