"""Speech handles: which sentences were heard at a play position, and an idempotent interrupt()."""

from __future__ import annotations

import asyncio

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.clock import FakeClock
from openab_voice.engine.handle import SpeechHandle, frames_for
from openab_voice.testing.dialogue_fakes import FakeSpeechOutput, PlayedResult


class CountingOutput(FakeSpeechOutput):
    """Reports a fixed position for one utterance and counts interrupt() calls."""

    def __init__(self, position: PlayedResult | None) -> None:
        super().__init__(FakeClock())
        self.position = position
        self.calls = 0

    def interrupt(self) -> PlayedResult | None:
        self.calls += 1
        return self.position


def handle_with(frames: list[int], *, output: FakeSpeechOutput | None = None) -> SpeechHandle:
    handle = SpeechHandle(response_id="r1", turn_id="t1", output=output or CountingOutput(None))
    for i, n in enumerate(frames):
        index = handle.add_sentence(f"S{i + 1}.")
        handle.add_frames(index, n)
        handle.complete_sentence(index)
    return handle


def played(handle: SpeechHandle, ms: float) -> None:
    handle.mark_played(PlayedResult(utterance_id="utt-1", played_ms=ms, interrupted=True))


def test_frames_for_pads_the_last_frame() -> None:
    assert frames_for(0) == 0
    assert frames_for(1) == 1
    assert frames_for(DISCORD_FRAME_BYTES) == 1
    assert frames_for(DISCORD_FRAME_BYTES + 1) == 2


def test_heard_sentences_follow_the_play_position() -> None:
    for ms, heard in [
        (0, ()),
        (380, ()),
        (400, ("S1.",)),
        (799, ("S1.",)),
        (800, ("S1.", "S2.")),
        (1200, ("S1.", "S2.", "S3.")),
    ]:
        handle = handle_with([20, 20, 20])
        played(handle, ms)
        assert handle.heard_sentences() == heard, ms
        assert handle.unheard_sentences() == ("S1.", "S2.", "S3.")[len(heard) :]
    assert handle.text == "S1. S2. S3."


def test_a_sentence_still_synthesizing_is_not_heard() -> None:
    handle = handle_with([10])
    index = handle.add_sentence("Half.")
    handle.add_frames(index, 5)  # all of its frames so far were played, but more were coming
    played(handle, 20 * 15)
    assert handle.heard_text() == "S1."
    assert handle.unheard_sentences() == ("Half.",)


def test_a_sentence_without_audio_is_skipped_not_heard() -> None:
    handle = handle_with([10, 0, 10])
    played(handle, 400)
    assert handle.heard_sentences() == ("S1.", "S3.")


async def test_interrupt_is_idempotent_and_uses_the_outputs_position() -> None:
    output = CountingOutput(PlayedResult(utterance_id="utt-7", played_ms=420.0, interrupted=True))
    handle = handle_with([20, 20], output=output)
    handle.bind_utterance("utt-7")
    never = asyncio.Event()

    async def forever() -> None:
        await never.wait()

    task = asyncio.create_task(forever())
    handle.bind_task(task)
    assert handle.interrupt() == 420.0
    assert handle.interrupt() == 420.0
    assert output.calls == 1
    assert handle.interrupted and handle.heard_text() == "S1."
    assert await handle.wait_closed(FakeClock(), 1.0)
    assert task.cancelled()


def test_interrupt_before_any_audio_touches_nothing() -> None:
    output = CountingOutput(None)
    handle = SpeechHandle(response_id="r1", turn_id="t1", output=output)
    assert handle.interrupt() == 0.0
    assert output.calls == 0


def test_another_utterances_position_is_not_ours() -> None:
    output = CountingOutput(PlayedResult(utterance_id="someone-else", played_ms=900.0, interrupted=True))
    handle = handle_with([20], output=output)
    handle.bind_utterance("utt-1")
    assert handle.interrupt() == 0.0
    assert handle.heard_text() == ""


async def test_wait_closed_is_bounded_on_the_clock() -> None:
    clock = FakeClock()
    handle = handle_with([1])
    stuck = asyncio.Event()

    async def ignore_cancel() -> None:
        try:
            await stuck.wait()
        except asyncio.CancelledError:
            await stuck.wait()  # a misbehaving task that swallows its first cancellation
            raise

    task = asyncio.create_task(ignore_cancel())
    handle.bind_task(task)
    await asyncio.sleep(0)
    handle.interrupt()
    waiter = asyncio.create_task(handle.wait_closed(clock, 2.0))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiter.done()
    clock.advance(2.0)
    assert await waiter is False
    stuck.set()
    await asyncio.wait({task})
