"""OpenAI Realtime failures in our error tree: what is retried and what is not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from openab_voice.providers.realtime_openai import connection_error, server_error


@pytest.mark.parametrize(
    ("kind", "code", "expected", "retryable"),
    [
        ("invalid_request_error", "invalid_api_key", "REALTIME_AUTH_FAILED", False),
        ("authentication_error", None, "REALTIME_AUTH_FAILED", False),
        ("invalid_request_error", "model_not_found", "REALTIME_MODEL_UNKNOWN", False),
        ("rate_limit_error", "rate_limit_exceeded", "REALTIME_RATE_LIMITED", True),
        ("invalid_request_error", "insufficient_quota", "REALTIME_RATE_LIMITED", True),
        ("invalid_request_error", "invalid_value", "REALTIME_REQUEST_REJECTED", False),
        ("server_error", "server_error", "REALTIME_SERVER_ERROR", True),
    ],
)
def test_server_error_events(kind: str, code: str | None, expected: str, retryable: bool) -> None:
    err = server_error(kind=kind, code=code, message="m", model="gpt-realtime")
    assert (err.code, err.retryable) == (expected, retryable)


class _Refused(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.response = SimpleNamespace(status_code=status)


@pytest.mark.parametrize(
    ("status", "expected", "retryable"),
    [
        (401, "REALTIME_AUTH_FAILED", False),
        (403, "REALTIME_AUTH_FAILED", False),
        (404, "REALTIME_MODEL_UNKNOWN", False),
        (429, "REALTIME_RATE_LIMITED", True),
        (503, "REALTIME_SERVER_ERROR", True),
        (400, "REALTIME_REQUEST_REJECTED", False),
    ],
)
def test_refused_upgrades(status: int, expected: str, retryable: bool) -> None:
    err = connection_error(_Refused(status), model="gpt-realtime")
    assert (err.code, err.retryable) == (expected, retryable)
    assert err.to_dict()["status"] == status


def test_a_lost_connection_is_retried() -> None:
    err = connection_error(ConnectionResetError("reset"), model="gpt-realtime")
    assert (err.code, err.retryable) == ("REALTIME_CONNECTION_LOST", True)
