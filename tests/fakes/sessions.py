"""Fakes for building a voice session as the bot does, without audio: an STT that is never reached and
a broker that records what the intake or the tools propose."""

from __future__ import annotations

from typing import Any

from openab_voice.actions.requests import ActionRequest, Outcome
from openab_voice.stt.base import Hypothesis, SttCapabilities


class SilentStt:
    """An STT the transcriber can be built on; nothing here decodes."""

    capabilities = SttCapabilities(
        name="silent", streaming=True, sample_rate=16_000, languages=("en",), model="none"
    )

    def transcribe(
        self, samples: Any, *, final: bool, quick: bool = False, prompt: str | None = None
    ) -> Hypothesis:
        raise AssertionError("no audio reaches it in these tests")

    def close(self) -> None:
        return None


class RecordingBroker:
    """What a session calls on a broker: ``propose``, recorded and answered with ``outcome``."""

    def __init__(self, outcome: Outcome | None = None) -> None:
        self.requests: list[ActionRequest] = []
        self._outcome = outcome or Outcome(ok=False, message="recorded", code="TEST_RECORDED")

    async def propose(self, request: ActionRequest) -> Outcome:
        self.requests.append(request)
        return self._outcome
