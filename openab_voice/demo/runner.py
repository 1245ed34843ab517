"""Runs one demo: emulator + real bot in one process, joined through ``/voice join``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from importlib import resources
from pathlib import Path
from typing import Any

from openab_voice.app import create_bot
from openab_voice.bus import EventBus
from openab_voice.bus.terminal import TerminalReporter
from openab_voice.clock import Clock, SystemClock
from openab_voice.config import Settings
from openab_voice.demo.recorder import Recorder
from openab_voice.demo.report import ReportBuilder
from openab_voice.demo.scenario import Scenario, SpeakerSpec
from openab_voice.discord.bot import VoiceBot
from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator import DiscordEmulator, EmulatorConfig, load_wav_48k_stereo

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 30.0


def greeting_pcm() -> bytes:
    return load_wav_48k_stereo(Path(str(resources.files("openab_voice.testing") / "assets" / "greeting.wav")))


async def _speaker_script(emulator: DiscordEmulator, spec: SpeakerSpec, origin: float, clock: Clock) -> None:
    speaker = emulator.speaker(int(spec.id))
    for item in sorted(spec.audio, key=lambda i: i.at):
        pcm = load_wav_48k_stereo(item.file)
        await clock.sleep(origin + item.at - clock.monotonic())
        await speaker.say(pcm, send_before_speaking=item.send_before_speaking)
    if spec.leave_at is not None:
        await clock.sleep(origin + spec.leave_at - clock.monotonic())
        await speaker.leave()


async def _start_bot(bot: VoiceBot, token: str) -> asyncio.Task[None]:
    task = asyncio.create_task(bot.start(token), name="discord-bot")
    ready = asyncio.create_task(bot.wait_until_ready())
    done, _ = await asyncio.wait({task, ready}, timeout=JOIN_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
    if ready not in done:
        ready.cancel()
        if task.done() and task.exception() is not None:
            raise EmulatorError(f"bot failed to start: {task.exception()}", code="EMULATOR_BOT_START_FAILED")
        raise EmulatorError("bot did not become ready", code="EMULATOR_BOT_START_FAILED")
    return task


async def run_demo(
    scenario: Scenario,
    *,
    settings: Settings,
    record_dir: Path | None = None,
    clock: Clock | None = None,
    bus: EventBus | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run ``scenario`` to its end and return the report (see README for its keys)."""
    clock = clock or SystemClock()
    bus = bus or EventBus()
    bus.bind_loop(asyncio.get_running_loop())
    # The demo always plays its greeting, so playback is enabled here, explicitly.
    settings = settings.model_copy(update={"playback_enabled": True})
    report = ReportBuilder(bus)
    reporter = None if quiet else TerminalReporter(bus)
    names = {s.id: s.name for s in scenario.speakers}
    emulator = DiscordEmulator(
        EmulatorConfig(
            dave=scenario.dave,
            loss=scenario.loss,
            reorder=scenario.reorder,
            jitter_ms=scenario.jitter_ms,
            seed=scenario.seed,
        ),
        clock=clock,
    )
    for spec in scenario.speakers:
        emulator.add_user(int(spec.id), spec.name)
    tasks: list[asyncio.Task[Any]] = []
    await emulator.start()
    try:
        bot = create_bot(settings, bus=bus, clock=clock, emulator=emulator)
        async with bot:
            bot_task = await _start_bot(bot, emulator.token)
            inviter = int(scenario.speakers[0].id)
            interaction = await emulator.invoke_command(
                inviter, "voice", subcommand="join", options={"channel": emulator.voice_channel_id}
            )
            session = await asyncio.wait_for(bot.voice.wait_joined(emulator.guild_id), JOIN_TIMEOUT_S)
            await emulator.wait_voice_ready(timeout=JOIN_TIMEOUT_S)
            reply = await asyncio.wait_for(interaction.response(), JOIN_TIMEOUT_S)
            log.info("join reply: %s", reply)
            origin = clock.monotonic()
            recorder = Recorder(origin)
            frames = session.receiver.subscribe()
            tasks.append(asyncio.create_task(recorder.consume(frames), name="recorder"))
            for spec in scenario.speakers:
                tasks.append(asyncio.create_task(_speaker_script(emulator, spec, origin, clock), name=f"spk-{spec.id}"))
            if scenario.greeting and session.playback is not None:
                tasks.append(asyncio.create_task(session.playback.play(greeting_pcm()), name="greeting"))
            await clock.sleep(origin + scenario.until - clock.monotonic())
            status = await emulator.invoke_command(inviter, "voice", subcommand="status")
            status_text = await asyncio.wait_for(status.response(), JOIN_TIMEOUT_S)
            if not quiet:
                print(status_text)
            await bot.voice.leave(emulator.guild_id)
            frames.close()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await bot.close()
            with contextlib.suppress(asyncio.CancelledError):
                await bot_task
        if record_dir is not None:
            recorder.write(record_dir)
        return report.build(names=names, bot_audio_ms=emulator.bot_audio.ms)
    finally:
        for task in tasks:
            task.cancel()
        report.close()
        if reporter is not None:
            reporter.close()
        await emulator.aclose()
