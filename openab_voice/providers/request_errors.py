"""A network provider's failed request, as the error tree's ``ProviderRequestFailed`` (retryable) or
``ProviderRequestRejected``."""

from __future__ import annotations

from typing import Any

from openab_voice.errors import OpenabError, ProviderRequestFailed, ProviderRequestRejected

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def request_error(kind: str, provider: str, exc: BaseException) -> OpenabError:
    """Translate a client library's failure into :class:`ProviderRequestFailed` / ``Rejected``.

    Duck-typed on ``status_code`` (HTTP errors) so this module needs no client library: a failure
    without a status (connection refused, reset, timeout, broken stream) is retryable, as are
    408/409/425/429 and 5xx; every other status is a rejection.
    """
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    details: dict[str, Any] = {
        "kind": kind,
        "provider": provider,
        "status": status,
        "failure": type(exc).__name__,
    }
    message = f"{kind} provider {provider!r} request failed: " + (
        f"HTTP {status}" if status is not None else type(exc).__name__
    )
    if status is None or status >= 500 or status in _RETRYABLE_STATUS:
        return ProviderRequestFailed(message, **details)
    return ProviderRequestRejected(message, **details)
