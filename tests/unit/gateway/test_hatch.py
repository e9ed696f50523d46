"""The hatch's classifier: 429, 5xx and no answer escalate; a client error never does."""

import pytest

from spear_gateway.hatch import FleetFailure, fleet_failure, may_escalate


class APIStatusError(Exception):
    """Shaped as LiteLLM's and OpenAI's status errors: a class and a status_code."""

    def __init__(self, status_code):
        super().__init__(f"status {status_code}")
        self.status_code = status_code


# The class hierarchy of litellm.Timeout and litellm.APIConnectionError (openai's names).
class APIConnectionError(Exception):
    status_code = 500


class APITimeoutError(APIConnectionError):
    pass


class Timeout(APITimeoutError):
    status_code = 408


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 409, 413, 422, 499])
def test_a_client_error_never_escalates(status):
    failure = fleet_failure(APIStatusError(status))
    assert failure == FleetFailure(status) and not failure.escalates


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 599])
def test_a_rate_limit_or_a_server_error_escalates_labelled_with_its_status(status):
    failure = fleet_failure(APIStatusError(status))
    assert failure.escalates and failure.label == str(status)


def test_a_timeout_escalates_as_a_timeout_not_as_its_408():
    assert fleet_failure(Timeout("no answer")) == FleetFailure("timeout")
    assert may_escalate("timeout")


def test_a_refused_connection_escalates_as_a_connection_failure():
    assert fleet_failure(APIConnectionError("refused")) == FleetFailure("connection")
    assert fleet_failure(ConnectionRefusedError()).escalates


def test_an_exception_without_a_status_is_not_evidence_the_fleet_failed():
    assert fleet_failure(KeyError("bug")) == FleetFailure(0)
    assert not fleet_failure(APIStatusError("503")).escalates


def test_a_status_that_is_not_an_http_status_is_refused_naming_what_is_allowed():
    with pytest.raises(ValueError, match="allowed are an HTTP status"):
        may_escalate("503")
