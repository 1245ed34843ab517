"""One error tree for the whole project.

Every error has a stable ``code`` (safe to match on in tests, logs and reports) and a
``retryable`` flag. Messages never contain secrets.

::

    OpenabError
    ├── ConfigError                 CONFIG_* (invalid, missing, secret unreadable, retired model, ...)
    ├── ProviderUnavailable         PROVIDER_UNAVAILABLE (missing extra, model, library),
    │                               ENGINE_FULL_DUPLEX_UNAVAILABLE
    ├── ProviderRequestFailed       PROVIDER_REQUEST_FAILED, REALTIME_RATE_LIMITED, REALTIME_SERVER_ERROR,
    │                               REALTIME_CONNECTION_LOST (retryable: connection, timeout, 429, 5xx)
    ├── ProviderRequestRejected     PROVIDER_REQUEST_REJECTED, REALTIME_AUTH_FAILED, REALTIME_MODEL_UNKNOWN,
    │                               REALTIME_REQUEST_REJECTED (retrying the same request will not help)
    ├── AudioError                  AUDIO_* (format mismatch, processing failure), TTS_SYNTHESIS_FAILED
    ├── VoiceError                  VOICE_* (not connected, playback unavailable, unknown utterance)
    │   └── PacketError             RTP_* / TRANSPORT_* (a dropped packet's reason)
    ├── IllegalTransition           ENGINE_ILLEGAL_TRANSITION (an input the dialogue state does not accept)
    ├── ResponseError               ENGINE_RESPONSE_FAILED, or the failed stage's code (LLM_FAILED,
    │                               TTS_FAILED, PLAYBACK_FAILED, TOOLS_FAILED, MEMORY_RECALL_FAILED, ...)
    ├── ToolInputError              TOOL_ARGUMENTS_INVALID (a tool handler refused its arguments)
    ├── VectorFileError             MEMORY_INDEX_CORRUPT (not a memory vector file)
    ├── EmulatorError               EMULATOR_*, SCENARIO_INVALID, SCENARIO_FILE_MISSING
    │   ├── RestError               EMULATOR_REST_ERROR (answered with an HTTP status and Discord code)
    │   ├── WireError               EMULATOR_BAD_REQUEST (a client message of the wrong shape)
    │   ├── MlsWireError            EMULATOR_MLS_MALFORMED
    │   └── UnknownHostError        EMULATOR_UNKNOWN_HOST (also an OSError, for aiohttp's resolver)
    ├── StoreError                  STORE_* (unavailable, migration missing)
    │   └── StaleTransition         STORE_CONFLICT (a compare-and-set update lost the race)
    ├── ActionError                 ACTION_* (refused confirmation, illegal job transition, unknown action,
    │   │                           unattributed request)
    │   └── DeliveryFailed          ACTION_DELIVERY_FAILED (the control channel could not be posted to)
    ├── AcpError                    ACP_* (spawn failed, protocol error, turn timeout, workspace busy)
    └── LifecycleError              LIFECYCLE_CLOSED, LIFECYCLE_NOT_STARTED, LIFECYCLE_ILLEGAL_TRANSITION

Every code is an :class:`ErrorCode` member (a ``StrEnum`` whose values equal their names, so a code
compares, formats and serializes as its plain string); codes that are reported rather than raised
(TOOL_* tool results, STT_DECODE_FAILED, ENGINE_INTERNAL_ERROR, MEMORY_* health verdicts, ACP_* verdicts,
ACTION_* refusals and job error codes, BENCH_* report entries) are members too.

Outside the tree, four that are never reported: :class:`WorkerFailed` carries a provider worker
thread's exception to the provider, which turns it into its own error at once;
:class:`ConnectionDropped` is the loopback realtime and live servers' counterpart of websockets'
``ConnectionClosed``; :class:`ReplyStopped` ends the loopback live server's reply at a barge-in;
:class:`SettleError` is the virtual clock's livelock report (a bug in the code
under test, a ``RuntimeError``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class ErrorCode(StrEnum):
    """Every stable error code: the member name is its value (``ErrorCode.X == "X"``)."""

    OPENAB_ERROR = "OPENAB_ERROR"

    CONFIG_INVALID = "CONFIG_INVALID"
    CONFIG_SECRET_UNREADABLE = "CONFIG_SECRET_UNREADABLE"
    CONFIG_REALTIME_MODEL_RETIRED = "CONFIG_REALTIME_MODEL_RETIRED"
    CONFIG_EXECUTOR_NEEDS_POSTGRES = "CONFIG_EXECUTOR_NEEDS_POSTGRES"
    CONFIG_MISSING = "CONFIG_MISSING"

    PROVIDER_UNAVAILABLE = "PROVIDER_UNAVAILABLE"
    PROVIDER_REQUEST_FAILED = "PROVIDER_REQUEST_FAILED"
    PROVIDER_REQUEST_REJECTED = "PROVIDER_REQUEST_REJECTED"

    AUDIO_ERROR = "AUDIO_ERROR"
    AUDIO_APM_FORMAT_MISMATCH = "AUDIO_APM_FORMAT_MISMATCH"
    AUDIO_APM_RUNTIME_ERROR = "AUDIO_APM_RUNTIME_ERROR"
    AUDIO_VAD_RUNTIME_ERROR = "AUDIO_VAD_RUNTIME_ERROR"
    AUDIO_FRONTEND_ERROR = "AUDIO_FRONTEND_ERROR"
    TTS_SYNTHESIS_FAILED = "TTS_SYNTHESIS_FAILED"

    VOICE_ERROR = "VOICE_ERROR"
    VOICE_PLAYBACK_UNAVAILABLE = "VOICE_PLAYBACK_UNAVAILABLE"
    VOICE_UTTERANCE_UNKNOWN = "VOICE_UTTERANCE_UNKNOWN"
    VOICE_CONNECT_FAILED = "VOICE_CONNECT_FAILED"

    PACKET_INVALID = "PACKET_INVALID"
    RTP_TRUNCATED = "RTP_TRUNCATED"
    RTP_BAD_VERSION = "RTP_BAD_VERSION"
    TRANSPORT_DECRYPT_FAILED = "TRANSPORT_DECRYPT_FAILED"
    TRANSPORT_BAD_KEY = "TRANSPORT_BAD_KEY"
    TRANSPORT_UNSUPPORTED_MODE = "TRANSPORT_UNSUPPORTED_MODE"

    EMULATOR_ERROR = "EMULATOR_ERROR"
    EMULATOR_BAD_AUDIO = "EMULATOR_BAD_AUDIO"
    EMULATOR_BAD_CONFIG = "EMULATOR_BAD_CONFIG"
    EMULATOR_BAD_INVOCATION = "EMULATOR_BAD_INVOCATION"
    EMULATOR_BAD_REQUEST = "EMULATOR_BAD_REQUEST"
    EMULATOR_BAD_USER = "EMULATOR_BAD_USER"
    EMULATOR_BOT_FAILED = "EMULATOR_BOT_FAILED"
    EMULATOR_CLIENT_STOPPED = "EMULATOR_CLIENT_STOPPED"
    EMULATOR_DAVE_FAILED = "EMULATOR_DAVE_FAILED"
    EMULATOR_DUPLICATE_USER = "EMULATOR_DUPLICATE_USER"
    EMULATOR_MLS_MALFORMED = "EMULATOR_MLS_MALFORMED"
    EMULATOR_NO_USERS = "EMULATOR_NO_USERS"
    EMULATOR_NOT_CONNECTED = "EMULATOR_NOT_CONNECTED"
    EMULATOR_NOT_IN_VOICE = "EMULATOR_NOT_IN_VOICE"
    EMULATOR_REST_ERROR = "EMULATOR_REST_ERROR"
    EMULATOR_STATE = "EMULATOR_STATE"
    EMULATOR_TIMEOUT = "EMULATOR_TIMEOUT"
    EMULATOR_UNKNOWN_CHANNEL = "EMULATOR_UNKNOWN_CHANNEL"
    EMULATOR_UNKNOWN_HOST = "EMULATOR_UNKNOWN_HOST"
    EMULATOR_UNKNOWN_MESSAGE = "EMULATOR_UNKNOWN_MESSAGE"
    EMULATOR_UNKNOWN_USER = "EMULATOR_UNKNOWN_USER"

    SCENARIO_INVALID = "SCENARIO_INVALID"
    SCENARIO_FILE_MISSING = "SCENARIO_FILE_MISSING"

    STORE_ERROR = "STORE_ERROR"
    STORE_CONFLICT = "STORE_CONFLICT"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    STORE_URL_INVALID = "STORE_URL_INVALID"
    STORE_DRIVER_MISSING = "STORE_DRIVER_MISSING"
    STORE_SCHEMA_OUTDATED = "STORE_SCHEMA_OUTDATED"
    STORE_DUPLICATE = "STORE_DUPLICATE"

    ACTION_ERROR = "ACTION_ERROR"
    ACTION_ALREADY_DECIDED = "ACTION_ALREADY_DECIDED"
    ACTION_CANCEL_RACE = "ACTION_CANCEL_RACE"
    ACTION_CONTAINMENT_UNAVAILABLE = "ACTION_CONTAINMENT_UNAVAILABLE"
    ACTION_DECISION_NOT_OFFERED = "ACTION_DECISION_NOT_OFFERED"
    ACTION_DELIVERY_FAILED = "ACTION_DELIVERY_FAILED"
    ACTION_EMPTY_GOAL = "ACTION_EMPTY_GOAL"
    ACTION_EXEC_UNAVAILABLE = "ACTION_EXEC_UNAVAILABLE"
    ACTION_EXPIRED = "ACTION_EXPIRED"
    ACTION_FINISHING = "ACTION_FINISHING"
    ACTION_ILLEGAL_TRANSITION = "ACTION_ILLEGAL_TRANSITION"
    ACTION_LOST = "ACTION_LOST"
    ACTION_NOT_DELIVERED = "ACTION_NOT_DELIVERED"
    ACTION_NOT_HERE = "ACTION_NOT_HERE"
    ACTION_NOT_OPERATOR = "ACTION_NOT_OPERATOR"
    ACTION_NOT_QUARANTINED = "ACTION_NOT_QUARANTINED"
    ACTION_NOT_STARTED = "ACTION_NOT_STARTED"
    ACTION_SHUTDOWN = "ACTION_SHUTDOWN"
    ACTION_STALE_SESSION = "ACTION_STALE_SESSION"
    ACTION_STOPPED = "ACTION_STOPPED"
    ACTION_UNATTRIBUTED = "ACTION_UNATTRIBUTED"
    ACTION_UNKNOWN = "ACTION_UNKNOWN"
    ACTION_WRONG_MESSAGE = "ACTION_WRONG_MESSAGE"

    ACP_ERROR = "ACP_ERROR"
    ACP_AGENT_EXITED = "ACP_AGENT_EXITED"
    ACP_AUTH_FAILED = "ACP_AUTH_FAILED"
    ACP_AUTH_METHOD_UNAVAILABLE = "ACP_AUTH_METHOD_UNAVAILABLE"
    ACP_AUTH_REQUIRED = "ACP_AUTH_REQUIRED"
    ACP_CANCEL_UNCONFIRMED = "ACP_CANCEL_UNCONFIRMED"
    ACP_CANCELLED_BY_AGENT = "ACP_CANCELLED_BY_AGENT"
    ACP_CONTAINMENT_UNAVAILABLE = "ACP_CONTAINMENT_UNAVAILABLE"
    ACP_CREDENTIAL_MISSING = "ACP_CREDENTIAL_MISSING"
    ACP_CREDENTIAL_REFUSED = "ACP_CREDENTIAL_REFUSED"
    ACP_CREDENTIAL_UNREADABLE = "ACP_CREDENTIAL_UNREADABLE"
    ACP_DRIVER_ERROR = "ACP_DRIVER_ERROR"
    ACP_MAX_TOKENS = "ACP_MAX_TOKENS"
    ACP_MAX_TURN_REQUESTS = "ACP_MAX_TURN_REQUESTS"
    ACP_POD_FAILED = "ACP_POD_FAILED"
    ACP_POD_UNAVAILABLE = "ACP_POD_UNAVAILABLE"
    ACP_PROMPT_ERROR = "ACP_PROMPT_ERROR"
    ACP_PROTOCOL_ERROR = "ACP_PROTOCOL_ERROR"
    ACP_PROTOCOL_VERSION = "ACP_PROTOCOL_VERSION"
    ACP_REFUSED = "ACP_REFUSED"
    ACP_SANDBOX_UNAVAILABLE = "ACP_SANDBOX_UNAVAILABLE"
    ACP_SPAWN_FAILED = "ACP_SPAWN_FAILED"
    ACP_STARTUP_TIMEOUT = "ACP_STARTUP_TIMEOUT"
    ACP_TURN_TIMEOUT = "ACP_TURN_TIMEOUT"
    ACP_WORKSPACE_BUSY = "ACP_WORKSPACE_BUSY"
    ACP_WORKSPACE_EXISTS = "ACP_WORKSPACE_EXISTS"
    ACP_WORKSPACE_FAILED = "ACP_WORKSPACE_FAILED"
    ACP_WORKSPACE_INVALID = "ACP_WORKSPACE_INVALID"
    ACP_WORKSPACE_QUARANTINED = "ACP_WORKSPACE_QUARANTINED"

    ENGINE_FULL_DUPLEX_UNAVAILABLE = "ENGINE_FULL_DUPLEX_UNAVAILABLE"
    ENGINE_ILLEGAL_TRANSITION = "ENGINE_ILLEGAL_TRANSITION"
    ENGINE_INTERNAL_ERROR = "ENGINE_INTERNAL_ERROR"
    ENGINE_RESPONSE_FAILED = "ENGINE_RESPONSE_FAILED"

    LLM_FAILED = "LLM_FAILED"
    TTS_FAILED = "TTS_FAILED"
    TOOLS_FAILED = "TOOLS_FAILED"
    PLAYBACK_FAILED = "PLAYBACK_FAILED"
    STT_DECODE_FAILED = "STT_DECODE_FAILED"
    MEMORY_RECALL_FAILED = "MEMORY_RECALL_FAILED"

    REALTIME_AUTH_FAILED = "REALTIME_AUTH_FAILED"
    REALTIME_CONNECTION_LOST = "REALTIME_CONNECTION_LOST"
    REALTIME_MODEL_UNKNOWN = "REALTIME_MODEL_UNKNOWN"
    REALTIME_RATE_LIMITED = "REALTIME_RATE_LIMITED"
    REALTIME_REQUEST_REJECTED = "REALTIME_REQUEST_REJECTED"
    REALTIME_SERVER_ERROR = "REALTIME_SERVER_ERROR"

    TOOL_ARGUMENTS_INVALID = "TOOL_ARGUMENTS_INVALID"
    TOOL_ARGUMENTS_MALFORMED = "TOOL_ARGUMENTS_MALFORMED"
    TOOL_AUDIT_UNAVAILABLE = "TOOL_AUDIT_UNAVAILABLE"
    TOOL_BAD_RESULT = "TOOL_BAD_RESULT"
    TOOL_BUDGET_EXCEEDED = "TOOL_BUDGET_EXCEEDED"
    TOOL_FAILED = "TOOL_FAILED"
    TOOL_ROUTER_DISABLED = "TOOL_ROUTER_DISABLED"
    TOOL_TIMEOUT = "TOOL_TIMEOUT"
    TOOL_UNKNOWN = "TOOL_UNKNOWN"

    MEMORY_EMBEDDER_CHANGED = "MEMORY_EMBEDDER_CHANGED"
    MEMORY_INDEX_CORRUPT = "MEMORY_INDEX_CORRUPT"
    MEMORY_INDEX_MISMATCH = "MEMORY_INDEX_MISMATCH"
    MEMORY_INDEX_MISSING = "MEMORY_INDEX_MISSING"
    MEMORY_NOT_OPEN = "MEMORY_NOT_OPEN"
    MEMORY_ROW_CORRUPT = "MEMORY_ROW_CORRUPT"

    LIFECYCLE_CLOSED = "LIFECYCLE_CLOSED"
    LIFECYCLE_ILLEGAL_TRANSITION = "LIFECYCLE_ILLEGAL_TRANSITION"
    LIFECYCLE_NOT_STARTED = "LIFECYCLE_NOT_STARTED"

    BENCH_NO_CLUSTER = "BENCH_NO_CLUSTER"
    BENCH_NO_POSTGRES = "BENCH_NO_POSTGRES"
    BENCH_NO_SANDBOX = "BENCH_NO_SANDBOX"
    BENCH_SANDBOX_FAILED = "BENCH_SANDBOX_FAILED"


class OpenabError(Exception):
    """Root of every error raised on purpose by openab_voice."""

    code: ClassVar[ErrorCode] = ErrorCode.OPENAB_ERROR
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, code: ErrorCode | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """A structured, JSON-friendly form (for CLI output and events)."""
        return {"code": self.code, "message": self.message, "retryable": self.retryable, **self.details}

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class ConfigError(OpenabError):
    """A setting is missing or invalid; ``setting`` names it."""

    code = ErrorCode.CONFIG_INVALID

    def __init__(self, message: str, *, setting: str, code: ErrorCode | None = None) -> None:
        super().__init__(message, code=code, setting=setting)
        self.setting = setting


class ProviderUnavailable(OpenabError):
    """A configured provider cannot start (missing package, model or native library)."""

    code = ErrorCode.PROVIDER_UNAVAILABLE


class AudioError(OpenabError):
    """Audio processing failed or was given frames it cannot use."""

    code = ErrorCode.AUDIO_ERROR


class VoiceError(OpenabError):
    """The voice connection cannot do what was asked."""

    code = ErrorCode.VOICE_ERROR
    retryable = True


class PacketError(VoiceError):
    """A received packet was rejected; ``code`` is the drop reason counted in stats."""

    code = ErrorCode.PACKET_INVALID
    retryable = False


class EmulatorError(OpenabError):
    """The loopback Discord emulator was given something it cannot serve."""

    code = ErrorCode.EMULATOR_ERROR


class StoreError(OpenabError):
    """The job store cannot be reached or is not at the expected schema."""

    code = ErrorCode.STORE_ERROR
    retryable = True


class StaleTransition(StoreError):
    """A compare-and-set update found the row changed since it was read: nothing was written."""

    code = ErrorCode.STORE_CONFLICT
    retryable = False


class ActionError(OpenabError):
    """An action request, confirmation or transition was refused; ``code`` says why."""

    code = ErrorCode.ACTION_ERROR


class AcpError(OpenabError):
    """The ACP agent could not be started, spoke the protocol wrongly, or did not finish in time."""

    code = ErrorCode.ACP_ERROR


class LifecycleError(OpenabError):
    """An object was used outside its running phase, or moved through an illegal transition."""

    code = ErrorCode.LIFECYCLE_CLOSED


class ProviderRequestFailed(OpenabError):
    """A provider request failed in a way worth retrying: connection, timeout, 408/409/429 or 5xx.

    ``details`` carry ``provider``, ``status`` (HTTP status or None) and ``kind`` (the failure class).
    """

    code = ErrorCode.PROVIDER_REQUEST_FAILED
    retryable = True


class ProviderRequestRejected(OpenabError):
    """A provider refused the request (400/401/403/404/422 ...): retrying the same request will not help."""

    code = ErrorCode.PROVIDER_REQUEST_REJECTED


class IllegalTransition(OpenabError):
    """An input that the current dialogue state does not accept (a bug in whoever sent it)."""

    code = ErrorCode.ENGINE_ILLEGAL_TRANSITION


class ResponseError(OpenabError):
    """A provider failed while a response ran; ``stage`` is ``llm``, ``tts``, ``playback``, ``tools`` or ``memory``."""

    code = ErrorCode.ENGINE_RESPONSE_FAILED
    retryable = True


class ToolInputError(OpenabError):
    """Raised by a tool handler to reject arguments the schema cannot express (e.g. an unknown time zone).

    The message is returned to the model as the reason, so it must not contain secrets.
    """

    code = ErrorCode.TOOL_ARGUMENTS_INVALID


class VectorFileError(OpenabError):
    """The file is not a memory vector file (wrong magic or unreadable header)."""

    code = ErrorCode.MEMORY_INDEX_CORRUPT


class RestError(EmulatorError):
    """An error answered to the client as ``{"code": ..., "message": ...}`` with an HTTP status."""

    code = ErrorCode.EMULATOR_REST_ERROR

    def __init__(self, status: int, discord_code: int, message: str) -> None:
        super().__init__(message, status=status, discord_code=discord_code)
        self.status = status
        self.discord_code = discord_code


class WireError(EmulatorError):
    """A client message did not have the expected shape."""

    code = ErrorCode.EMULATOR_BAD_REQUEST


class MlsWireError(EmulatorError):
    """An MLS structure was truncated or malformed."""

    code = ErrorCode.EMULATOR_MLS_MALFORMED


class UnknownHostError(EmulatorError, OSError):
    """A client tried to reach a host the emulator does not serve.

    It is an ``OSError`` so aiohttp reports it like any failed DNS lookup
    (``ClientConnectorDNSError``) instead of crashing the connector.
    """

    code = ErrorCode.EMULATOR_UNKNOWN_HOST


class DeliveryFailed(ActionError):
    """A message could not be posted (or pinned) in the control text channel."""

    code = ErrorCode.ACTION_DELIVERY_FAILED
    retryable = True


class WorkerFailed(Exception):
    """A provider worker thread's job raised ``error`` (the provider turns it into its own error)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


class ConnectionDropped(Exception):
    """The loopback realtime connection was dropped (by a fault or ``LoopbackSession.drop``); nothing
    more is sent."""


class ReplyStopped(Exception):
    """The loopback live server's reply was stopped (speech over it, a fixture) before what it was
    waiting for; what it said is recorded where it stopped."""


class SettleError(RuntimeError):
    """The event loop never ran out of ready callbacks: something reschedules itself forever."""
