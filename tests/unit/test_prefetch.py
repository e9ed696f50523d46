"""The background prefetch (localhosts/prefetch.py) makes what the tests install on first use, in the
order they first need it, and a step that fails stops none of the others."""

from __future__ import annotations

from localhosts import prefetch
from localhosts.servers.litellm_venv import TESTED_LITELLM


def test_the_steps_are_litellms_venvs_then_the_four_harnesses_then_the_images():
    assert [what for what, _ in prefetch.steps()] == [
        *(f"LiteLLM {v}" for v in TESTED_LITELLM), "harness qwen-code", "harness openhands",
        "harness claude-code", "harness codex", "the seat image", "the gateway image"]


def test_a_failed_step_is_named_and_the_next_ones_still_run(monkeypatch, capsys):
    ran = []

    def broken():
        ran.append("b")
        raise OSError("registry unreachable")

    monkeypatch.setattr(prefetch, "steps", lambda: [("a", lambda: ran.append("a")), ("b", broken),
                                                    ("c", lambda: ran.append("c"))])
    assert prefetch.main() == 1
    assert ran == ["a", "b", "c"]
    err = capsys.readouterr().err
    assert "OSError: registry unreachable" in err
    assert "prefetch: failed: b (the tests that need them make them again)" in err


def test_nothing_failed_is_a_zero_exit(monkeypatch):
    monkeypatch.setattr(prefetch, "steps", lambda: [("a", lambda: None)])
    assert prefetch.main() == 0
