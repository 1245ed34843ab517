"""The session a loopback Live connection holds: ``session.start`` resolved, ``session.update`` applied.

``session.start`` carries a :class:`~openai.types.live.SessionConfig`; ``session.started`` reports
the :class:`~openai.types.live.SessionResource` with the server's defaults filled in (the ``marin``
voice, ``audio/pcm`` at 24 kHz, client delegation with no acknowledgement delay, the default
instructions when blank). The model must be one the installed SDK names (``SessionConfig.model``'s
Literal); the loopback speaks only ``audio/pcm`` (16 or 24 kHz: the SDK's ``AudioPCM.rate``), not
G.711. ``session.update`` may change only the delegation (same type, merged field by field) and
the triggers; everything else is immutable after startup, as the SDK says.
"""

from __future__ import annotations

import math
import typing
from typing import Any, Final, Literal

from openai.types.live import FunctionTool, SessionConfig, SessionResource, SessionUpdateConfig
from openai.types.live.audio_format import AudioPCM

from openab_voice.testing.live.wire import Refusal

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_VOICE",
    "KNOWN_MODELS",
    "MAX_APPEND_TOKENS",
    "PCM_RATES",
    "DelegationTarget",
    "apply_update",
    "delegation_target",
    "function_tools",
    "resolve_session",
    "session_rate",
    "tokens",
]

DelegationTarget = Literal["client", "responses", "decisions"]


def _sdk_models() -> frozenset[str]:
    """The Live model names the installed SDK knows (``SessionConfig.model``'s Literal)."""
    names: set[str] = set()
    for arg in typing.get_args(SessionConfig.model_fields["model"].annotation):
        names.update(a for a in typing.get_args(arg) if isinstance(a, str))
    return frozenset(names)


KNOWN_MODELS: Final = _sdk_models()
PCM_RATES: Final = frozenset(typing.get_args(AudioPCM.model_fields["rate"].annotation))
DEFAULT_VOICE: Final = "marin"
DEFAULT_INSTRUCTIONS: Final = "You are a helpful voice assistant. Keep answers short."
MAX_INSTRUCTIONS_TOKENS: Final = 16_384
MAX_APPEND_TOKENS: Final = 500
MAX_INPUT_ITEMS: Final = 128
_ACK_DELAY_MS: Final = {"client": 0, "responses": 0, "decisions": 400}


def tokens(text: str) -> int:
    """A token count for the API's limits, by the usual four characters per token (no tokenizer here)."""
    return math.ceil(len(text) / 4)


def resolve_session(
    config: SessionConfig, *, session_id: str, expires_at: int, models: frozenset[str]
) -> SessionResource | Refusal:
    """The resource ``session.started`` reports for ``config``, or why the session is refused."""
    if config.model not in models:
        message = f"The model `{config.model}` does not exist or you do not have access to it."
        return Refusal(code="model_not_found", message=message, param="session.model")
    data: dict[str, Any] = config.model_dump(mode="json", exclude_none=True)
    audio = data.get("audio", {})
    fmt = audio.get("format", {"type": "audio/pcm", "rate": 24_000})
    if fmt["type"] != "audio/pcm" or fmt.get("rate") not in PCM_RATES:
        rates = " or ".join(str(rate) for rate in sorted(PCM_RATES))
        message = f"The loopback Live server speaks only audio/pcm at {rates} Hz, not {fmt['type']}."
        return Refusal(code="invalid_value", message=message, param="session.audio.format")
    instructions = (config.instructions or "").strip() or DEFAULT_INSTRUCTIONS
    if tokens(instructions) > MAX_INSTRUCTIONS_TOKENS:
        message = f"Instructions are limited to {MAX_INSTRUCTIONS_TOKENS} tokens."
        return Refusal(code="string_above_max_length", message=message, param="session.instructions")
    if len(config.input or ()) > MAX_INPUT_ITEMS:
        message = f"At most {MAX_INPUT_ITEMS} input messages are supported."
        return Refusal(code="array_above_max_length", message=message, param="session.input")
    delegation = data.get("delegation") or {"type": "client"}
    delegation.setdefault("acknowledgement_delay_ms", _ACK_DELAY_MS[delegation["type"]])
    voice = audio.get("output", {}).get("voice", DEFAULT_VOICE)
    data.update(
        id=session_id,
        expires_at=expires_at,
        status="active",
        audio={"format": fmt, "output": {"voice": voice}},
        delegation=delegation,
        instructions=instructions,
        input=data.get("input", []),
        triggers=data.get("triggers", []),
        store=data.get("store", False),
    )
    return SessionResource.model_validate(data)


def apply_update(resource: SessionResource, update: SessionUpdateConfig) -> SessionResource | Refusal:
    """``resource`` after a ``session.update``, or why it is refused (a change of delegation type)."""
    data: dict[str, Any] = resource.model_dump(mode="json", exclude_none=True)
    if "delegation" in update.model_fields_set:
        change = (
            update.delegation.model_dump(mode="json", exclude_unset=True)
            if update.delegation is not None
            else {"type": "client"}
        )
        current = data["delegation"]
        if change["type"] != current["type"]:
            message = f"The delegation type cannot change after startup (it is {current['type']!r})."
            return Refusal(code="invalid_value", message=message, param="session.delegation.type")
        for key, value in change.items():
            if isinstance(value, dict) and isinstance(current.get(key), dict):
                current[key] = {**current[key], **value}  # a sparse backend update
            else:
                current[key] = value
    if update.triggers is not None:
        data["triggers"] = [t.model_dump(mode="json", exclude_none=True) for t in update.triggers]
    return SessionResource.model_validate(data)


def delegation_target(resource: SessionResource) -> DelegationTarget:
    """Where the Live model's delegations go."""
    delegation = resource.delegation
    return delegation.type if delegation is not None else "client"


def function_tools(resource: SessionResource) -> tuple[FunctionTool, ...]:
    """The function tools of a Responses delegation (none for other targets)."""
    delegation = resource.delegation
    if delegation is None or delegation.type != "responses":
        return ()
    return tuple(tool for tool in delegation.responses.tools or () if isinstance(tool, FunctionTool))


def session_rate(resource: SessionResource | None) -> int:
    """The PCM sample rate of the session's audio, both ways."""
    fmt = resource.audio.format if resource is not None and resource.audio is not None else None
    return fmt.rate if fmt is not None else 24_000
