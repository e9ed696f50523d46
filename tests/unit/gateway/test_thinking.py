"""The gateway takes a harness's thinking asks out of a `coder` request (spear_gateway/
thinking.py): the fleet's model has no thinking mode, and LiteLLM refused them with a 400."""

from spear_gateway.thinking import drop_thinking


def test_each_dialects_thinking_ask_is_dropped_and_the_rest_of_the_request_kept():
    chat = {"model": "coder", "messages": [], "reasoning_effort": "medium", "max_tokens": 9}
    responses = {"model": "coder", "input": [], "reasoning": {"summary": "auto"}}
    messages = {"model": "coder", "messages": [], "thinking": {"type": "adaptive"},
                "output_config": {"effort": "high"}}
    for request in (chat, responses, messages):
        drop_thinking(request)
    assert chat == {"model": "coder", "messages": [], "max_tokens": 9}
    assert responses == {"model": "coder", "input": []}
    assert messages == {"model": "coder", "messages": []}


def test_an_ask_in_extra_body_is_dropped_too():
    request = {"model": "coder", "extra_body": {"reasoning_effort": "high", "top_k": 20}}
    drop_thinking(request)
    assert request == {"model": "coder", "extra_body": {"top_k": 20}}


def test_the_output_config_keeps_what_is_not_the_effort():
    request = {"output_config": {"effort": "low", "format": {"type": "json_schema"}}}
    drop_thinking(request)
    assert request == {"output_config": {"format": {"type": "json_schema"}}}
