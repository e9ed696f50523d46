"""The hatch's classifier: which fleet failures may escalate to `frontier` (seed 001 step 5).

Only an answer of 429 or 5xx, or no answer at all (a timeout, a refused or dropped
connection), means the fleet could not serve a request the frontier could. A client error
(400, 401, 404, 422, ...) would fail the same way on any model: escalating it burns frontier
budget on every retry of a malformed request, so it reaches the developer unchanged.

Pure: the exception is read by its class names and its `status_code`, the way LiteLLM's and
OpenAI's exception classes carry them, so this module needs neither installed. The rule itself
is spear.rules.escalates, which the policy pack shares (shipped beside this package).
"""

from __future__ import annotations

from dataclasses import dataclass

from spear.rules import escalates

# Names of exception classes (anywhere in the class's MRO) that mean "no answer".
# litellm.Timeout subclasses openai.APITimeoutError, which subclasses APIConnectionError: the
# timeout names are checked first so a timeout is labelled as one.
_TIMEOUT_CLASSES = frozenset({"Timeout", "APITimeoutError", "TimeoutError", "TimeoutException",
                              "ReadTimeout", "ConnectTimeout"})
_CONNECTION_CLASSES = frozenset({"APIConnectionError", "ConnectError", "ConnectionError",
                                 "RemoteProtocolError"})


@dataclass(frozen=True)
class FleetFailure:
    """What the fleet answered: an HTTP status, "timeout" or "connection"."""

    status: int | str

    @property
    def label(self) -> str:
        """The value of the `status` label on spear_hatch_escalations_total."""
        return str(self.status)

    @property
    def escalates(self) -> bool:
        return may_escalate(self.status)


def may_escalate(status: int | str) -> bool:
    """429 and 5xx escalate, and so does no answer; everything else is the client's error."""
    if status in ("timeout", "connection"):
        return True
    if type(status) is not int:
        raise ValueError(f"fleet status {status!r}: allowed are an HTTP status (int), "
                         "'timeout' or 'connection'")
    return escalates(status)


def fleet_failure(error: BaseException) -> FleetFailure:
    """The fleet's answer behind `error`. An exception with neither a known class nor an integer
    status_code is not evidence that the fleet failed: it is labelled 0 and does not escalate."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & _TIMEOUT_CLASSES:
        return FleetFailure("timeout")
    if names & _CONNECTION_CLASSES:
        return FleetFailure("connection")
    status = getattr(error, "status_code", None)
    return FleetFailure(status if type(status) is int else 0)
