"""A value preview cannot know fails a rule instead of passing it unchecked."""

from harness import UNKNOWN, check_resource, check_stack, prod

import jinja_enabled
import llama_source_pinned
import ports_distinct


def test_an_unknown_command_line_cannot_pass_a_resource_rule():
    props = prod("server-conf")
    props["command_line"] = UNKNOWN
    [message] = check_resource(jinja_enabled.POLICY, props)
    assert "command_line can't be known during preview" in message
    assert "cannot be verified at preview" in message


def test_an_unknown_nested_value_cannot_pass_a_resource_rule():
    props = prod("llama-server-build")
    props["source"]["commit"] = UNKNOWN
    [message] = check_resource(llama_source_pinned.POLICY, props)
    assert ".source.commit can't be known during preview" in message


def test_an_unknown_port_cannot_pass_the_stack_rule():
    props = prod("server-conf")
    props["binds"][0]["port"] = UNKNOWN
    [message] = check_stack(ports_distinct.POLICY, prod("stack"), [props])
    assert "binds.0.port can't be known during preview" in message
