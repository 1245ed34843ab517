"""The emulator's view of the bot's audio (``BotAudioSink``): when each talk spurt started reaching the
call, so a latency is read from the first packet, not from whenever a poll happened to look."""

from __future__ import annotations

import math
import struct

import pytest
from discord.opus import Encoder

from openab_voice.discord.wire.rtp import OPUS_SILENCE, build_header
from openab_voice.discord.wire.transport import XCHACHA, cipher_for, seal_packet
from openab_voice.testing.emulator.bot_audio import BotAudioSink

_KEY = bytes(range(32))
_SSRC = 4242


def _tone_frame() -> bytes:
    samples = [int(8000 * math.sin(2 * math.pi * 440 * n / 48_000)) for n in range(960)]
    return struct.pack("<1920h", *[s for s in samples for _ in range(2)])


class _Bot:
    """Sends as discord.py does: one sealed Opus packet per 20 ms, silence frames after a playback."""

    def __init__(self, sink: BotAudioSink) -> None:
        self.sink = sink
        self.cipher = cipher_for(XCHACHA, _KEY)
        self.encoder = Encoder()  # type: ignore[no-untyped-call]
        self.opus = self.encoder.encode(_tone_frame(), 960)
        self.sequence = 0

    def send(self, payload: bytes, at: float) -> None:
        self.sequence += 1
        header, body = build_header(self.sequence, self.sequence * 960, _SSRC)
        self.sink.feed(seal_packet(self.cipher, header, body, payload, self.sequence), self.cipher, None, at)

    def speak(self, start: float, frames: int) -> None:
        for n in range(frames):
            self.send(self.opus, start + 0.02 * n)

    def end(self, at: float) -> None:
        for n in range(5):
            self.send(OPUS_SILENCE, at + 0.02 * n)


def test_the_first_packet_of_the_answer_is_its_start_however_late_one_looks() -> None:
    sink = BotAudioSink()
    bot = _Bot(sink)
    bot.speak(1.0, 10)  # an earlier answer, 1.00-1.18
    bot.end(1.2)
    bot.speak(3.0, 25)  # the answer to a question asked at 2.5: 3.00-3.48

    assert sink.last_audio_at == pytest.approx(3.48)  # what a poll 480 ms late would have read
    assert sink.first_audio_after(2.5) == 3.0
    assert sink.first_audio_after(0.0) == 1.0
    assert sink.first_audio_after(3.0) is None  # nothing has started since
    assert list(sink.spurt_starts) == [1.0, 3.0]


def test_a_pause_in_the_bot_audio_without_silence_frames_starts_a_spurt_only_when_long() -> None:
    sink = BotAudioSink()
    bot = _Bot(sink)
    bot.speak(1.0, 5)  # 1.00-1.08
    bot.speak(1.2, 5)  # a 120 ms hole between sentences: the same spurt
    bot.speak(2.0, 5)  # 700 ms later: new speech

    assert list(sink.spurt_starts) == [1.0, 2.0]
    sink.reset()
    assert sink.first_audio_after(0.0) is None
