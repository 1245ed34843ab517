"""Runs one demo: emulator + real bot in one process, joined through ``/voice join``."""

from __future__ import annotations

import asyncio
import contextlib
from importlib import resources
from pathlib import Path
from typing import Any

from openab_voice.app import build_providers
from openab_voice.bus import EventBus
from openab_voice.bus.terminal import TerminalReporter
from openab_voice.clock import Clock, SystemClock
from openab_voice.config import Settings
from openab_voice.demo.report import ReportBuilder
from openab_voice.demo.scenario import Scenario, SpeakerSpec
from openab_voice.providers.speech_registry import TtsConfig, tts_registry
from openab_voice.testing.emulator import EmulatorConfig, load_wav_48k_stereo
from openab_voice.testing.harness import BotOnEmulator


def greeting_pcm() -> bytes:
    return load_wav_48k_stereo(Path(str(resources.files("openab_voice.testing") / "assets" / "greeting.wav")))


async def synthesize_lines(scenario: Scenario) -> dict[str, bytes]:
    """Text -> 48 kHz stereo PCM for every ``say`` item, synthesized before the demo starts so that
    synthesis time never shifts the timeline. Uses the local Piper voice."""
    lines = {item.say for spec in scenario.speakers for item in spec.audio if item.say is not None}
    if not lines:
        return {}
    tts = tts_registry().create("piper", TtsConfig())
    try:
        return {line: b"".join([chunk async for chunk in tts.synthesize(line)]) for line in sorted(lines)}
    finally:
        await tts.aclose()


async def _speaker_script(h: BotOnEmulator, spec: SpeakerSpec, spoken: dict[str, bytes]) -> None:
    speaker = h.emulator.speaker(int(spec.id))
    for item in sorted(spec.audio, key=lambda i: i.at):
        if item.say is not None:
            pcm = spoken[item.say]
        else:
            assert item.file is not None  # the scenario model requires exactly one of the two
            pcm = load_wav_48k_stereo(item.file)
        await h.at(item.at)
        await speaker.say(pcm, send_before_speaking=item.send_before_speaking)
    if spec.leave_at is not None:
        await h.at(spec.leave_at)
        await speaker.leave()


async def run_demo(
    scenario: Scenario,
    *,
    settings: Settings,
    record_dir: Path | None = None,
    clock: Clock | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run ``scenario`` to its end and return the report (see README for its keys)."""
    bus = EventBus()
    # The demo speaks (greeting, answers), so playback and dialogue are enabled here, explicitly.
    settings = settings.model_copy(update={"playback_enabled": True, "dialogue_enabled": scenario.dialogue})
    report = ReportBuilder(bus)
    reporter = None if quiet else TerminalReporter(bus)
    config = EmulatorConfig(
        dave=scenario.dave,
        loss=scenario.loss,
        reorder=scenario.reorder,
        jitter_ms=scenario.jitter_ms,
        seed=scenario.seed,
        bot_name=scenario.bot_name,
    )
    users = {int(s.id): s.name for s in scenario.speakers}
    spoken = await synthesize_lines(scenario)
    providers = build_providers(settings)
    tasks: list[asyncio.Task[Any]] = []
    try:
        async with BotOnEmulator(
            settings, config, users=users, clock=clock or SystemClock(), bus=bus, providers=providers
        ) as h:
            for spec in scenario.speakers:
                tasks.append(asyncio.create_task(_speaker_script(h, spec, spoken), name=f"speaker-{spec.id}"))
            playback = h.session.playback
            if scenario.greeting and playback is not None:
                tasks.append(asyncio.create_task(playback.play(greeting_pcm()), name="greeting"))
            await h.at(scenario.until)
            status = await h.command("status")
            if not quiet:
                print(status)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await h.bot.voice.leave(h.emulator.guild_id)
            if record_dir is not None:
                h.recorder.write(record_dir)
            bot_audio_ms = h.emulator.bot_audio.ms
        return report.build(names={s.id: s.name for s in scenario.speakers}, bot_audio_ms=bot_audio_ms)
    finally:
        for task in tasks:
            task.cancel()
        await providers.aclose()
        report.close()
        if reporter is not None:
            reporter.close()
