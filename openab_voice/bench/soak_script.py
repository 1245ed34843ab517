"""The soak's call: two people talking to the bot and over it, a third joining and leaving, and the
voice server forcing the bot to resume, for as long as the soak runs; then, optionally, a long
silence after which one more question must still be transcribed (behind the emulator's NAT, only the
bot's UDP keep-alive keeps the path open while nobody speaks).

Each round one speaker asks the bot a question whose answer is long; then, in turn: the other talks
over the answer a second in ("Wait, stop please ..."), the answer is left to finish, or both talk at
once over it. Every ``churn_every_s`` a third member joins (a DAVE epoch change) and leaves half that
time later. Every ``resume_every_s`` the emulator forces the voice connection to move: close 4015
(resumable), close 4006 (session invalid: identify again), a voice server move, or nothing. What the
bot did afterwards (its next answer's audio, the next transcript) is recorded per event, so the
report says whether it recovered, and how fast, rather than assuming it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from openab_voice.clock import Clock
from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator.rtp_stream import SendReport
from openab_voice.testing.harness import BotOnEmulator

__all__ = ["ALICE", "BOB", "CAROL", "LINES", "ResumeKind", "Script", "ScriptCounts"]

ALICE, BOB, CAROL = 1001, 1002, 1003
LINES = {
    "capital": "Jarvis, what is the capital of France?",
    "tower": "Jarvis, tell me about the Eiffel Tower.",
    "stop": "Wait, stop please, I want to ask you something else instead.",
    "aside": "I think the weather is really nice today, we should go for a walk.",
}
ResumeKind = Literal["4015", "4006", "move", "none"]
_ANSWER_WAIT_S = 10.0
_QUIET_S = 0.6
_SETTLE_LIMIT_S = 20.0
_POLL_S = 0.02


@dataclass(slots=True)
class ScriptCounts:
    """What the script did, cumulative."""

    rounds: int = 0
    answered: int = 0  # rounds where bot audio reached the emulator after the question
    talk_overs: int = 0
    overlaps: int = 0
    round_errors: int = 0
    joins: int = 0
    leaves: int = 0
    sent_packets: dict[int, int] = field(default_factory=dict)  # per speaker, packets that went out
    impairment_drops: int = 0
    answers_at: list[float] = field(default_factory=list)  # arrival of each answer's first packet
    forced: list[dict[str, Any]] = field(default_factory=list)  # one per forced voice event
    errors: list[str] = field(default_factory=list)


class Script:
    """Drives the call on ``h`` with the synthesized ``clips`` (48 kHz stereo PCM by ``LINES`` key)."""

    def __init__(
        self,
        h: BotOnEmulator,
        clips: dict[str, bytes],
        *,
        clock: Clock,
        seed: int,
        resume: ResumeKind,
        resume_every_s: float,
        churn_every_s: float,
    ) -> None:
        self._h = h
        self._clips = clips
        self._clock = clock
        self._rng = random.Random(seed)
        self._resume: ResumeKind = resume
        self._resume_every_s = resume_every_s
        self._churn_every_s = churn_every_s
        self.counts = ScriptCounts()
        self._stopping = False

    # --- talking ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Let the round in progress finish, then stop talking (every packet sent is then reported)."""
        self._stopping = True

    async def talk(self) -> None:
        """Rounds until :meth:`stop` (or cancelled)."""
        while not self._stopping:
            try:
                await self._round(self.counts.rounds)
            except EmulatorError as exc:
                # The bot is out of the call (a forced close it did not survive): keep trying.
                self.counts.round_errors += 1
                self._note(f"round {self.counts.rounds}: {exc.code}")
                await self._clock.sleep(2.0)
            self.counts.rounds += 1

    async def _say(self, user_id: int, key: str) -> SendReport:
        report = await self._h.emulator.speaker(user_id).say(self._clips[key])
        self.counts.sent_packets[user_id] = self.counts.sent_packets.get(user_id, 0) + report.sent
        self.counts.impairment_drops += report.dropped_by_impairment
        return report

    async def _round(self, n: int) -> None:
        asker, other = (ALICE, BOB) if n % 2 == 0 else (BOB, ALICE)
        sink = self._h.emulator.bot_audio
        asked = self._clock.monotonic()
        await self._say(asker, "capital" if self._rng.random() < 0.5 else "tower")
        first = await self._wait_for(lambda: (sink.last_audio_at or 0.0) > asked, _ANSWER_WAIT_S)
        if first and sink.last_audio_at is not None:
            self.counts.answered += 1
            self.counts.answers_at.append(sink.last_audio_at)
            match n % 3:
                case 0:  # the other talks over the answer
                    await self._clock.sleep(1.0)
                    self.counts.talk_overs += 1
                    await self._say(other, "stop")
                case 1:  # the answer is left to finish
                    pass
                case _:  # both talk at once, over the answer
                    await self._clock.sleep(1.0)
                    self.counts.overlaps += 1
                    await asyncio.gather(self._say(asker, "aside"), self._say(other, "aside"))
        await self._settle()
        await self._clock.sleep(0.5 + self._rng.random())

    async def _settle(self) -> None:
        """Until the bot has been silent for ``_QUIET_S`` (at most ``_SETTLE_LIMIT_S``)."""
        sink = self._h.emulator.bot_audio

        def quiet() -> bool:
            last = sink.last_audio_at
            return last is None or self._clock.monotonic() - last >= _QUIET_S

        await self._wait_for(quiet, _SETTLE_LIMIT_S)

    async def _wait_for(self, ready: Callable[[], bool], within_s: float) -> bool:
        deadline = self._clock.monotonic() + within_s
        while not ready():
            if self._clock.monotonic() >= deadline:
                return False
            await self._clock.sleep(_POLL_S)
        return True

    async def after_silence(self, silence_s: float) -> tuple[float, SendReport]:
        """The silent phase: nobody talks (and the bot, done answering, plays nothing) for
        ``silence_s``, then alice asks once; returns when she began and what went out."""
        await self._settle()
        await self._clock.sleep(silence_s)
        began = self._clock.monotonic()
        return began, await self._say(ALICE, "capital")

    # --- members ---------------------------------------------------------------------------------

    async def churn(self) -> None:
        """A third member joins every ``churn_every_s`` and leaves half that time later."""
        while True:
            await self._clock.sleep(self._churn_every_s / 2)
            try:
                if self.counts.joins == 0:
                    self._h.emulator.add_user(CAROL, "carol")
                else:
                    await self._h.emulator.speaker(CAROL).join()
                self.counts.joins += 1
                await self._clock.sleep(self._churn_every_s / 2)
                await self._h.emulator.speaker(CAROL).leave()
                self.counts.leaves += 1
            except EmulatorError as exc:
                self._note(f"churn: {exc.code}")

    # --- forced resumes ----------------------------------------------------------------------------

    async def force(self, started: float) -> None:
        """The configured voice event every ``resume_every_s``; each one recorded."""
        if self._resume == "none":
            return
        while True:
            await self._clock.sleep(self._resume_every_s)
            at = self._clock.monotonic()
            record: dict[str, Any] = {"at_s": round(at - started, 1), "kind": self._resume}
            try:
                if self._resume == "move":
                    record["endpoint_port"] = self._h.emulator.move_voice_server()
                else:
                    await self._h.emulator.close_voice(int(self._resume))
                record["applied"] = True
            except EmulatorError as exc:
                record.update(applied=False, error=exc.code)
            record["_at"] = at
            self.counts.forced.append(record)

    def _note(self, message: str) -> None:
        if len(self.counts.errors) < 50:
            self.counts.errors.append(message)


_JUDGE_S = 30.0  # an event this close to the end of the run is reported, not judged


def recovery(
    record: dict[str, Any],
    *,
    answers_at: list[float],
    finals_at: list[float],
    gaps: list[Any],
    ended_at: float,
) -> dict[str, Any]:
    """A forced event's record with what followed it: the gap the bot reported for it
    (``VoiceGap``: cause, recovery, duration), the next answer's first audio and the next final
    transcript after it (None: never, within the run), and whether the call went on."""
    at = float(record["_at"])
    answer = next((t for t in answers_at if t > at), None)
    final = next((t for t in finals_at if t > at), None)
    gap = next((g for g in gaps if float(getattr(g, "started_at", g.at)) >= at - 1.0), None)
    out = {k: v for k, v in record.items() if not k.startswith("_")}
    out["gap"] = (
        None
        if gap is None
        else {
            name: getattr(gap, name, None)
            for name in (
                "cause",
                "close_code",
                "recovery",
                "duration_s",
                "recovered",
                "playback_interrupted",
                "attempts",
            )
        }
    )
    out["next_answer_audio_after_s"] = None if answer is None else round(answer - at, 2)
    out["next_transcript_after_s"] = None if final is None else round(final - at, 2)
    if ended_at - at < _JUDGE_S:
        out["recovered"] = None
        out["note"] = f"the run ended {ended_at - at:.0f} s after it: not judged"
    else:
        gap_ok = gap is None or bool(getattr(gap, "recovered", True))
        out["recovered"] = gap_ok and answer is not None and final is not None
    return out
