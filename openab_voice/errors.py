"""One error tree for the whole project.

Every error has a stable ``code`` (safe to match on in tests, logs and reports) and a
``retryable`` flag. Messages never contain secrets.

::

    OpenabError
    ├── ConfigError                 CONFIG_INVALID, CONFIG_SECRET_UNREADABLE
    ├── ProviderUnavailable         PROVIDER_UNAVAILABLE (missing extra, model, library),
    │                               ENGINE_FULL_DUPLEX_UNAVAILABLE
    ├── AudioError                  AUDIO_* (format mismatch, processing failure), TTS_SYNTHESIS_FAILED
    ├── VoiceError                  VOICE_* (not connected, playback unavailable, unknown utterance)
    │   └── PacketError             RTP_* / TRANSPORT_* / DAVE_* (a dropped packet's reason)
    ├── EmulatorError               EMULATOR_*, SCENARIO_INVALID, SCENARIO_FILE_MISSING
    ├── StoreError                  STORE_* (unavailable, migration missing)
    │   └── StaleTransition         STORE_CONFLICT (a compare-and-set update lost the race)
    ├── ActionError                 ACTION_* (refused confirmation, illegal job transition, unknown action,
    │                               unattributed request, delivery failure)
    └── AcpError                    ACP_* (spawn failed, protocol error, turn timeout, workspace busy)

Provider request errors (``providers.speech_registry``: ProviderRequestFailed / Rejected; the realtime
engine's REALTIME_AUTH_FAILED, REALTIME_MODEL_UNKNOWN, REALTIME_REQUEST_REJECTED are rejections and
REALTIME_RATE_LIMITED, REALTIME_SERVER_ERROR, REALTIME_CONNECTION_LOST retryable failures) and the codes
the engine reports on the bus (LLM_FAILED, TTS_FAILED, STT_DECODE_FAILED, ENGINE_ILLEGAL_TRANSITION,
TOOL_* from the tool registry) follow the same shape: a stable ``code`` plus ``retryable``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class OpenabError(Exception):
    """Root of every error raised on purpose by openab_voice."""

    code: ClassVar[str] = "OPENAB_ERROR"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
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

    code = "CONFIG_INVALID"

    def __init__(self, message: str, *, setting: str, code: str | None = None) -> None:
        super().__init__(message, code=code, setting=setting)
        self.setting = setting


class ProviderUnavailable(OpenabError):
    """A configured provider cannot start (missing package, model or native library)."""

    code = "PROVIDER_UNAVAILABLE"


class AudioError(OpenabError):
    """Audio processing failed or was given frames it cannot use."""

    code = "AUDIO_ERROR"


class VoiceError(OpenabError):
    """The voice connection cannot do what was asked."""

    code = "VOICE_ERROR"
    retryable = True


class PacketError(VoiceError):
    """A received packet was rejected; ``code`` is the drop reason counted in stats."""

    code = "PACKET_INVALID"
    retryable = False


class EmulatorError(OpenabError):
    """The loopback Discord emulator was given something it cannot serve."""

    code = "EMULATOR_ERROR"


class StoreError(OpenabError):
    """The job store cannot be reached or is not at the expected schema."""

    code = "STORE_ERROR"
    retryable = True


class StaleTransition(StoreError):
    """A compare-and-set update found the row changed since it was read: nothing was written."""

    code = "STORE_CONFLICT"
    retryable = False


class ActionError(OpenabError):
    """An action request, confirmation or transition was refused; ``code`` says why."""

    code = "ACTION_ERROR"


class AcpError(OpenabError):
    """The ACP agent could not be started, spoke the protocol wrongly, or did not finish in time."""

    code = "ACP_ERROR"
