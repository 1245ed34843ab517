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
from openab_voice.app import build_app
from openab_voice.app.providers import probe_engine
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, SystemClock, wait_for
from openab_voice.config import Settings
from openab_voice.demo.channel import text_channel_report
from openab_voice.demo.live import loopback_live_provider
from openab_voice.demo.realtime import loopback_provider
from openab_voice.demo.scenario import EventItem, Scenario, SpeakerSpec, split_pauses
from openab_voice.demo.slash import SlashCall, voice_commands
from openab_voice.providers.tts import TtsConfig, tts_registry
from openab_voice.report.builder import ReportBuilder
from openab_voice.report.terminal import TerminalReporter
from openab_voice.testing.emulator import EmulatorConfig, load_wav_48k_stereo
from openab_voice.testing.harness import BotOnEmulator

ACTION_GRACE_S = 30.0
COMMAND_WAIT_S = 60.0  # one /voice command's handler (a summary by the offline chat model included)
OVER_BOT_WAIT_S = 15.0  # a barge-in line waits at most this long for the bot to be heard
_PAUSE_S = 0.3  # no bot audio for this long: the bot paused (a gap between two packets is 20 ms)
_POLL_S = 0.02


def _loopback_server(settings: Settings) -> contextlib.AbstractAsyncContextManager[Settings] | None:
    """The loopback server a speech-to-speech engine runs against in the demo; None for the cascade."""
    if settings.engine == "realtime":
        return loopback_provider(settings)
    if settings.engine == "live":
        return loopback_live_provider(settings)
    return None


def greeting_pcm() -> bytes:
    return load_wav_48k_stereo(Path(str(resources.files("openab_voice.testing") / "assets" / "greeting.wav")))


async def synthesize_lines(scenario: Scenario) -> dict[str, bytes]:
    """Text -> 48 kHz stereo PCM for every ``say`` item, synthesized before the demo starts so that
    synthesis time never shifts the timeline. Uses the local Piper voice; a ``<pause S>`` in a line
    is S seconds of silence between its parts, each part synthesized on its own (a speaker who stops
    to think mid-sentence)."""
    lines = {item.say for spec in scenario.speakers for item in spec.audio if item.say is not None}
    if not lines:
        return {}
    tts = tts_registry().create("piper", TtsConfig())

    async def spoken(line: str) -> bytes:
        pcm = b""
        for part, pause_s in split_pauses(line):
            pcm += b"".join([chunk async for chunk in tts.synthesize(part)])
            pcm += bytes(round(pause_s * 48_000) * 4)  # 48 kHz, 2 channels, 16 bits
        return pcm

    try:
        return {line: await spoken(line) for line in sorted(lines)}
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


def _demo_settings(scenario: Scenario, settings: Settings, data_dir: Path) -> Settings:
    """The scenario's switches over ``settings``. Actions are on when it names an operator: that
    speaker confirms, with this agent; ``meeting_record`` and ``memory`` set the transcript store and
    long-term memory when given, ``end_of_turn`` how a turn ends. Unless the data directory was set, the demo keeps its store,
    memory and workspaces in ``data_dir`` (a scratch folder), out of the user's."""
    update: dict[str, Any] = {"playback_enabled": True, "dialogue_enabled": scenario.dialogue}
    if scenario.operator is not None:
        command = scenario.acp_agent or scripted_agent_command()
        update |= {
            "actions_enabled": True,
            "operator_user_id": int(scenario.operator),
            "acp_agent_command": shlex.join(command),
        }
    if scenario.meeting_record is not None:
        update["transcript_store"] = scenario.meeting_record
    if scenario.memory is not None:
        update["memory_enabled"] = scenario.memory
    if scenario.end_of_turn is not None:
        update["end_of_turn"] = scenario.end_of_turn
    if "data_dir" not in settings.model_fields_set:
        update["data_dir"] = data_dir
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
    await _slash_command(h, event.slash_call(), user_id, at=event.at)


async def _slash_command(h: BotOnEmulator, call: SlashCall, user_id: int, *, at: float) -> None:
    """Invoke ``call`` as ``user_id`` and wait until the bot's handler has returned, so that every
    reply it sends (a deferral's follow-ups, a long summary's later parts) is in the report."""
    options: dict[str, Any] = dict(call.options)
    for name in call.missing:  # only FILLED_LATER options: the newest action the channel mentions
        options[name] = _latest_action_id(h) or "none"
    for spec in voice_commands()[call.subcommand]:
        if spec.kind == "channel" and spec.name in options:
            options[spec.name] = _channel_id(h, str(options[spec.name]))
    interaction = await h.emulator.invoke_command(
        user_id, "voice", subcommand=call.subcommand, options=options or None
    )
    # discord.py registers the listener when wait_for is called (before any await), and dispatches
    # app_command_completion once the command's callback has returned (CommandTree._call).
    completed = h.bot.wait_for("app_command_completion", check=lambda i, _c: i.id == interaction.id)
    try:
        await wait_for(h.clock, COMMAND_WAIT_S, completed)
        ended = ""
    except TimeoutError:
        ended = f" (the bot's handler did not return within {COMMAND_WAIT_S:.0f} s)"
    replies = "\n".join(
        reply.content + "".join(f" [file {f.filename}, {len(f.data)} bytes]" for f in reply.files)
        for reply in interaction.replies
    )
    print(f"[demo] {at:.1f}s: {interaction.command_text} by {user_id}{ended}:\n{replies or '(no reply)'}")


def _channel_id(h: BotOnEmulator, value: str) -> int | str:
    """A channel option's value: the emulator's channel by name (``voice``, ``general`` or ``text``)
    or an id; anything else is passed on for the emulator to refuse."""
    text, voice = h.emulator.text_channel_id, h.emulator.voice_channel_id
    named = {"voice": voice, "general": text, "text": text}
    return named.get(value.lower(), int(value) if value.isdigit() else value)


def _latest_action_id(h: BotOnEmulator) -> str | None:
    for message in reversed(h.emulator.messages()):
        match = re.search(r"`(a-[0-9a-f]+)`", str(message.get("content", "")))
        if match:
            return match.group(1)
    return None


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
    scratch = tempfile.TemporaryDirectory(prefix="openab-demo-")
    settings = _demo_settings(scenario, settings, Path(scratch.name))
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
        nat_timeout_s=scenario.nat_timeout_s,
    )
    users = {int(s.id): s.name for s in scenario.speakers}
    spoken = await synthesize_lines(scenario)
    provider = contextlib.AsyncExitStack()  # the loopback server of --engine realtime or live
    try:
        if scenario.dialogue and (server := _loopback_server(settings)) is not None:
            settings = await provider.enter_async_context(server)
        app = build_app(settings, bus=bus, clock=clock)
        await probe_engine(app.providers, bus=bus, clock=clock)
    except BaseException:
        await provider.aclose()
        raise
    tasks: list[asyncio.Task[Any]] = []
    commands: list[asyncio.Task[Any]] = []  # the slash events due by the end
    try:
        async with BotOnEmulator.on(app, config, users=users) as h:
            for spec in scenario.speakers:
                tasks.append(asyncio.create_task(_speaker_script(h, spec, spoken), name=f"speaker-{spec.id}"))
            for i, event in enumerate(scenario.events):
                tasks.append(asyncio.create_task(_event_script(h, event), name=f"event-{i}"))
                if event.slash is not None and event.at <= scenario.until:
                    commands.append(tasks[-1])
            playback = h.session.playback
            if scenario.greeting and playback is not None:
                tasks.append(asyncio.create_task(playback.play(greeting_pcm()), name="greeting"))
            await h.at(scenario.until)
            if h.actions is not None:
                # A confirmed action still running gets a bounded while to finish and post its result.
                with contextlib.suppress(TimeoutError):
                    await wait_for(clock, ACTION_GRACE_S, h.actions.executor.wait_idle())
            # Each command due by now is answered in full (its own wait is bounded): its replies are
            # in the report whether or not the handler took longer than the scenario allowed.
            await asyncio.gather(*commands, return_exceptions=True)
            text_channel = text_channel_report(h.emulator, users)
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
            emulator = h.emulator.udp_stats()
            # Every voice channel status the bot set (OPENAB_VOICE_STATUS), on the report's timeline.
            voice_status = [dict(e, at=round(e["at"] - h.origin, 3)) for e in h.emulator.voice_statuses]
            emulator = {**emulator, "voice_status": voice_status}
        return report.build(
            names={s.id: s.name for s in scenario.speakers},
            bot_audio_ms=bot_audio_ms,
            text_channel=text_channel,
            emulator=emulator,
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
