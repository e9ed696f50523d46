"""The one waiter (components/hostops/waiting.py): when it asks, what it answers, how a wait
fails early."""

from __future__ import annotations

import time

import pytest

from components.hostops.waiting import wait_until


def test_a_condition_that_holds_at_once_is_asked_once_and_not_waited_for():
    asked = []
    began = time.monotonic()
    assert wait_until(lambda: asked.append(1) or True, timeout=5, interval=5) is True
    assert asked == [1] and time.monotonic() - began < 1


def test_a_condition_that_comes_to_hold_ends_the_wait_at_the_next_ask():
    answers = iter([False, 0, "ready"])
    assert wait_until(lambda: next(answers), timeout=5, interval=0.01) is True


def test_a_condition_that_never_holds_is_false_once_the_timeout_has_passed():
    asked = []
    began = time.monotonic()
    assert wait_until(lambda: asked.append(1), timeout=0.2, interval=0.05) is False
    assert time.monotonic() - began >= 0.2 and len(asked) >= 3


def test_a_condition_with_no_time_left_is_still_asked_once():
    assert wait_until(lambda: True, timeout=0) is True


def test_what_the_condition_raises_ends_the_wait_at_once():
    def died() -> bool:
        raise RuntimeError("the server exited")

    began = time.monotonic()
    with pytest.raises(RuntimeError, match="the server exited"):
        wait_until(died, timeout=5, interval=5)
    assert time.monotonic() - began < 1
