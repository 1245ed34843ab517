"""Runs one demo: emulator + real bot in one process, joined through ``/voice join``."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from openab_voice.actions.ports import button_id, parse_button_id
from openab_voice.app import build_app, probe_realtime
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, SystemClock, wait_for
from openab_voice.config import Settings
from openab_voice.demo.realtime import loopback_provider
from openab_voice.demo.scenario import EventItem, Scenario, SpeakerSpec
from openab_voice.providers.speech_registry import TtsConfig, tts_registry
from openab_voice.report.builder import ReportBuilder
from openab_voice.report.terminal import TerminalReporter
from openab_voice.testing.emulator import EmulatorConfig, load_wav_48k_stereo
from openab_voice.testing.harness import BotOnEmulator

ACTION_GRACE_S = 30.0
OVER_BOT_WAIT_S = 15.0  # a barge-in line waits at most this long for the bot to be heard
_PAUSE_S = 0.3  # no bot audio for this long: the bot paused (a gap between two packets is 20 ms)
_POLL_S = 0.02


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


async def _bot_heard_for(h: BotOnEmulator, seconds: float) -> None:
    """Return once the bot's audio has reached the emulator for ``seconds`` with no pause of
    ``_PAUSE_S`` (or after ``OVER_BOT_WAIT_S``, when it never was)."""
    sink = h.emulator.bot_audio
    deadline = h.clock.monotonic() + OVER_BOT_WAIT_S
    since: float | None = None  # start of the bot's current run of audio
    while (now := h.clock.monotonic()) < deadline:
        last = sink.last_audio_at
        if last is None or now - last > _PAUSE_S:
            since = None
        elif since is None:
            since = now
        elif now - since >= seconds:
            return
        await h.clock.sleep(_POLL_S)


async def _speaker_script(h: BotOnEmulator, spec: SpeakerSpec, spoken: dict[str, bytes]) -> None:
    speaker = h.emulator.speaker(int(spec.id))
    for item in sorted(spec.audio, key=lambda i: i.at):
        if item.say is not None:
            pcm = spoken[item.say]
        else:
            assert item.file is not None  # the scenario model requires exactly one of the two
            pcm = load_wav_48k_stereo(item.file)
        await h.at(item.at)
        if item.over_bot_after_s is not None:
            await _bot_heard_for(h, item.over_bot_after_s)
        await speaker.say(pcm, send_before_speaking=item.send_before_speaking)
    if spec.leave_at is not None:
        await h.at(spec.leave_at)
        await speaker.leave()


def scripted_agent_command() -> list[str]:
    """The deterministic ACP agent shipped for tests and the demo (a real subprocess)."""
    return [sys.executable, "-m", "openab_voice.testing.acp_agent"]


def _action_settings(scenario: Scenario, settings: Settings, data_dir: Path) -> Settings:
    """Actions are on when the scenario names an operator: that speaker confirms, with this agent."""
    if scenario.operator is None:
        return settings
    command = scenario.acp_agent or scripted_agent_command()
    update: dict[str, Any] = {
        "actions_enabled": True,
        "operator_user_id": int(scenario.operator),
        "acp_agent_command": shlex.join(command),
    }
    if "data_dir" not in settings.model_fields_set:
        update["data_dir"] = data_dir  # the demo keeps its store and workspaces out of the user's data dir
    return settings.model_copy(update=update)


def _latest_proposal(h: BotOnEmulator) -> tuple[int, str] | None:
    """(message id, action id) of the newest message still carrying Confirm / Reject buttons."""
    for message in reversed(h.emulator.messages()):
        for row in message.get("components") or []:
            for button in row.get("components") or []:
                parsed = parse_button_id(str(button.get("custom_id", "")))
                if parsed is not None:
                    return int(message["id"]), parsed[1]
    return None


async def _event_script(h: BotOnEmulator, event: EventItem) -> None:
    await h.at(event.at)
    if event.voice is not None:
        print(f"[demo] {event.at:.1f}s: {await h.emulator.apply_voice_event(event.voice_event())}")
        return
    assert event.by is not None
    user_id = int(event.by)
    if event.click is not None:
        latest = _latest_proposal(h)
        if latest is None:
            print(f"[demo] {event.at:.1f}s: no pending proposal to {event.click}")
            return
        message_id, action_id = latest
        interaction = await h.emulator.click_button(user_id, message_id, button_id(event.click, action_id))
        print(f"[demo] {event.at:.1f}s: {event.by} clicked {event.click}: {await interaction.response()}")
        return
    options: dict[str, Any] = {}
    if event.subcommand in ("cancel", "reconcile"):
        options["action_id"] = event.arguments[0] if event.arguments else (_latest_action_id(h) or "none")
    reply = await h.command(event.subcommand, user_id=user_id, **options)
    print(f"[demo] {event.at:.1f}s: /{event.slash} by {event.by}:\n{reply}")


def _latest_action_id(h: BotOnEmulator) -> str | None:
    for message in reversed(h.emulator.messages()):
        match = re.search(r"`(a-[0-9a-f]+)`", str(message.get("content", "")))
        if match:
            return match.group(1)
    return None


def text_channel_report(h: BotOnEmulator) -> list[dict[str, Any]]:
    """The text channel as the emulator holds it: every message, whether pinned, its buttons."""
    pinned = set(h.emulator.pins())
    out = []
    for message in h.emulator.messages():
        buttons = [
            {"label": b.get("label"), "custom_id": b.get("custom_id"), "disabled": bool(b.get("disabled"))}
            for row in message.get("components") or []
            for b in row.get("components") or []
        ]
        author = message.get("author") or {}
        out.append(
            {
                "id": str(message["id"]),
                "author": author.get("username", str(author.get("id", ""))),
                "content": message.get("content", ""),
                "pinned": int(message["id"]) in pinned,
                "components": buttons,
            }
        )
    return out


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
    scratch = tempfile.TemporaryDirectory(prefix="openab-demo-")
    settings = _action_settings(scenario, settings, Path(scratch.name))
    clock = clock or SystemClock()
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
    provider = contextlib.AsyncExitStack()  # the loopback realtime server, for --engine realtime
    try:
        if settings.engine == "realtime" and scenario.dialogue:
            settings = await provider.enter_async_context(loopback_provider(settings))
        app = build_app(settings, bus=bus, clock=clock)
        await probe_realtime(app.providers, bus=bus, clock=clock)
    except BaseException:
        await provider.aclose()
        raise
    tasks: list[asyncio.Task[Any]] = []
    try:
        async with BotOnEmulator.on(app, config, users=users) as h:
            for spec in scenario.speakers:
                tasks.append(asyncio.create_task(_speaker_script(h, spec, spoken), name=f"speaker-{spec.id}"))
            for i, event in enumerate(scenario.events):
                tasks.append(asyncio.create_task(_event_script(h, event), name=f"event-{i}"))
            playback = h.session.playback
            if scenario.greeting and playback is not None:
                tasks.append(asyncio.create_task(playback.play(greeting_pcm()), name="greeting"))
            await h.at(scenario.until)
            if h.actions is not None:
                # A confirmed action still running gets a bounded while to finish and post its result.
                with contextlib.suppress(TimeoutError):
                    await wait_for(clock, ACTION_GRACE_S, h.actions.executor.wait_idle())
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
            text_channel = text_channel_report(h)
        return report.build(
            names={s.id: s.name for s in scenario.speakers},
            bot_audio_ms=bot_audio_ms,
            text_channel=text_channel,
        )
    finally:
        for task in tasks:
            task.cancel()
        await app.aclose()
        await provider.aclose()
        scratch.cleanup()
        report.close()
        if reporter is not None:
            reporter.close()
