"""A value preview cannot know fails a rule instead of passing it unchecked."""

from policies.inference import jinja_enabled, llama_source_pinned, ports_distinct
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, check_stack, prod, prod_stack


def test_an_unknown_command_line_cannot_pass_a_resource_rule():
    props = prod(tokens.SERVER_CONF)
    props["command_line"] = UNKNOWN
    [message] = check_resource(jinja_enabled.POLICY, tokens.SERVER_CONF, props)
    assert "command_line can't be known during preview" in message
    assert "cannot be verified at preview" in message


def test_an_unknown_nested_value_cannot_pass_a_resource_rule():
    props = prod(tokens.LLAMA_SERVER_BUILD)
    props["source"]["commit"] = UNKNOWN
    [message] = check_resource(llama_source_pinned.POLICY, tokens.LLAMA_SERVER_BUILD, props)
    assert ".source.commit can't be known during preview" in message


def test_an_unknown_port_cannot_pass_the_stack_rule():
    props = prod(tokens.SERVER_CONF)
    props["binds"][0]["port"] = UNKNOWN
    [message] = check_stack(ports_distinct.POLICY, prod_stack(), [(tokens.SERVER_CONF, props)])
    assert "binds.0.port can't be known during preview" in message
