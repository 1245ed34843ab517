"""The response subgraph's contract: what a response is asked, what it runs on, how it fails.

A response is chat model -> sentence segmenter -> TTS -> output, with tool rounds, run as one task
the conversation manager owns. Its parts live beside this module: :mod:`~openab_voice.engine.runner`
(:class:`~openab_voice.engine.runner.ResponseRunner`: one response, a task group of the two halves
joined by a sentence queue, reporting its end); :mod:`~openab_voice.engine.generation` (the generate
half: the model's sentences, tool rounds, long-term memory); :mod:`~openab_voice.engine.speaking`
(the speak half: synthesis, whole frames, playback, the checks of the response's cause); and
:mod:`~openab_voice.engine.hold` (a response prepared ahead of its turn, its reports held back until
the turn is confirmed). Here: the request (:class:`ResponseRequest`), the providers every response of
a conversation shares (:class:`ResponseDeps`), the one tool path (:data:`ToolPath`), and the error a
response fails with (:class:`ResponseError`, named by :func:`stage`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.engine.context import MemoryRecall
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.handle import SpeechOutput
from openab_voice.engine.settings import DialogueSettings
from openab_voice.errors import ErrorCode, OpenabError, ResponseError
from openab_voice.providers.chat import ChatMessage, ChatModel
from openab_voice.providers.tts import TextToSpeech
from openab_voice.tools.router import ToolRouter

__all__ = [
    "ResponseDeps",
    "ResponseRequest",
    "ToolPath",
    "close_stream",
    "stage",
]


ToolPath: TypeAlias = ToolRouter
"""The one tool path: the :class:`~openab_voice.tools.router.ToolRouter` (budgets, truncation, audit;
off, it runs nothing). A bare :class:`~openab_voice.tools.registry.ToolRegistry` is not one (ADR 0011)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseDeps:
    """What every response of one conversation shares."""

    bus: EventBus
    clock: Clock
    chat: ChatModel | None  # None: the voice only says given lines (the realtime engine's exact voice)
    tts: TextToSpeech
    output: SpeechOutput
    tools: ToolPath
    settings: DialogueSettings
    session_id: str | None
    memory: MemoryRecall | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseRequest:
    """One response to run.

    Attributes:
        messages: the model request (system prompt, context, the new user turn).
        replay: sentences to say first (a resume after a false interruption).
        generate: run the model (False for a pure replay).
        eou_at: end of the user's speech, for ``eou_to_first_audio_ms`` (None for a resume).
        speaker_id: the user who asked.
        cause: what must still hold for the speech to be said; checked before each sentence's
            synthesis and before the first frame goes out (None: always true).
        labels: speaker names a model may start its reply with (``"Alice:"``); the segmenter
            strips them.
        own_name: the bot's name (its wake name): stripped as a label or vocative, and a reply
            that is only this name is not said.
        recall: recall long-term memory for the turn (False: answer without it).
    """

    messages: tuple[ChatMessage, ...]
    replay: tuple[str, ...] = ()
    generate: bool = True
    eou_at: float | None = None
    speaker_id: str | None = None
    cause: SpeechCause | None = None
    labels: tuple[str, ...] = ()
    own_name: str | None = None
    recall: bool = True


@contextlib.contextmanager
def stage(name: str, *, passing: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Turn a provider's failure into a :class:`ResponseError` naming the stage (never cancellation).

    A :class:`ResponseError` already raised, and the ``passing`` signals, go through unchanged.
    """
    try:
        yield
    except Exception as exc:
        if isinstance(exc, (ResponseError, *passing)):
            raise
        code = exc.code if isinstance(exc, OpenabError) else ErrorCode(f"{name.upper()}_FAILED")
        raise ResponseError(f"{name}: {type(exc).__name__}: {exc}", code=code, stage=name) from exc


async def close_stream(iterator: AsyncIterator[Any]) -> None:
    """``aclose`` an async generator (stops synthesis / generation); plain iterators have none."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()
