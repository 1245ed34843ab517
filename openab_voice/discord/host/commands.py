"""The ``/voice`` slash command group: ``join [channel]``, ``leave``, ``status``, ``actions``, ``cancel <id>``,
``reconcile <id>``, ``transcript [session]``, ``summary [session]``, ``memory [forget]``."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import discord
from discord import app_commands

from openab_voice.actions.broker import ActionBroker
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.discord.host.service import VoiceService
from openab_voice.discord.wire.events import CommandInvoked
from openab_voice.errors import OpenabError
from openab_voice.memory.long_term import LongTermMemory
from openab_voice.memory.meeting import MeetingRecords, Refusal
from openab_voice.store.records import ActionRecord

log = logging.getLogger(__name__)


def format_status(status: dict[str, Any], names: dict[str, str] | None = None) -> str:
    """Human-readable ``/voice status`` text."""
    names = names or {}
    dave = status["dave"]
    lines = [
        f"Voice: {status['channel']} · DAVE {'on' if dave['enabled'] else 'off'}"
        + (f" · privacy code {dave['privacy_code']}" if dave["privacy_code"] else "")
        + f" · playback {'on' if status['playback_enabled'] else 'off'}"
    ]
    audio = status.get("audio")
    if audio:
        degraded = audio.get("degraded") or []
        lines.append(
            f"Audio: APM {audio['apm']}, VAD {audio['vad']}"
            + (f" · DEGRADED ({', '.join(degraded)})" if degraded else "")
        )
    channel_status = status.get("voice_status")
    if channel_status:
        lines.append(
            f"Channel status: {channel_status['shown'] or 'none'} · {channel_status['sent']} set, "
            f"{channel_status['failures']} failed"
        )
    for uid, s in sorted(status["speakers"].items()):
        dropped = ", ".join(f"{k}={v}" for k, v in sorted(s.get("dropped", {}).items())) or "none"
        lines.append(
            f"{names.get(uid, uid)} ({uid}): received {s.get('packets', 0)}, decoded {s.get('decoded_frames', 0)} frames"
            f" ({s.get('decoded_ms', 0.0):.0f} ms), concealed {s.get('concealed', 0)}, lost {s.get('lost', 0)},"
            f" dropped {dropped}"
        )
    if not status["speakers"]:
        lines.append("No speakers heard yet.")
    unattributed = status.get("unattributed") or {}
    if unattributed:
        lines.append("Unattributed drops: " + ", ".join(f"{k}={v}" for k, v in sorted(unattributed.items())))
    return "\n".join(lines)


_MESSAGE_CHARS = 2000  # Discord's limit for one message's content
_ACTIONS_OFF = "Actions are off (OPENAB_ACTIONS_ENABLED)."


class VoiceCommands(app_commands.Group, name="voice", description="Voice channel controls", guild_only=True):
    """The ``/voice`` command group on ``service`` and, when actions are on, ``broker``.

    Args:
        service: the joined voice sessions; ``join``, ``leave`` and ``status`` act on it.
        broker: the action plane's broker (None: actions are off).
        bus: where each invocation is published as :class:`CommandInvoked`.
        clock: stamps those events.
        meeting: answers ``transcript`` and ``summary`` (None: transcripts are not stored).
        memory: answers ``memory`` (None: long-term memory is off).
        operator_id: this user sees and forgets everyone's memory records.
    """

    def __init__(
        self,
        service: VoiceService,
        *,
        broker: ActionBroker | None,
        bus: EventBus,
        clock: Clock,
        meeting: MeetingRecords | None = None,
        memory: LongTermMemory | None = None,
        operator_id: int | None = None,
    ) -> None:
        super().__init__()
        # Private names: the group's own attributes (name, parent, ...) and its commands share the namespace.
        self._service = service
        self._broker = broker
        self._bus = bus
        self._clock = clock
        self._records = meeting or MeetingRecords(None)
        self._memory = memory
        self._operator_id = operator_id

    def _record(self, interaction: discord.Interaction, command: str, ok: bool, detail: str = "") -> None:
        self._bus.publish(
            CommandInvoked(
                at=self._clock.monotonic(),
                command=command,
                user_id=str(interaction.user.id),
                ok=ok,
                detail=detail,
            )
        )

    @app_commands.command(name="join", description="Join a voice channel (yours if none is given)")
    @app_commands.describe(channel="The voice channel to join")
    async def join(
        self, interaction: discord.Interaction, channel: discord.VoiceChannel | None = None
    ) -> None:
        target = channel
        member = interaction.user
        if target is None and isinstance(member, discord.Member) and member.voice and member.voice.channel:
            voice_channel = member.voice.channel
            if isinstance(voice_channel, discord.VoiceChannel):
                target = voice_channel
        if target is None:
            self._record(interaction, "voice join", False, "no channel")
            await interaction.response.send_message(
                "Join a voice channel first, or name one.", ephemeral=True
            )
            return
        await interaction.response.defer(thinking=True)
        try:
            session = await self._service.join(target, text_channel_id=interaction.channel_id)
        except OpenabError as exc:
            self._record(interaction, "voice join", False, exc.code)
            await interaction.followup.send(f"Could not join {target.name}: {exc.message}")
            return
        self._record(interaction, "voice join", True, target.name)
        mode = "listening and speaking" if session.playback is not None else "listening only"
        code = session.privacy_code
        dave = (
            ("DAVE on" + (f", privacy code {code}" if code else "")) if session.dave_enabled else "DAVE off"
        )
        await interaction.followup.send(f"Joined {target.name} ({mode}; {dave}).")

    @app_commands.command(name="leave", description="Leave the voice channel")
    async def leave(self, interaction: discord.Interaction) -> None:
        assert interaction.guild_id is not None
        left = await self._service.leave(interaction.guild_id)
        self._record(interaction, "voice leave", left)
        await interaction.response.send_message(
            "Left the voice channel." if left else "I am not in a voice channel."
        )

    @app_commands.command(name="status", description="Connection, DAVE and per-speaker receive counters")
    async def status(self, interaction: discord.Interaction) -> None:
        assert interaction.guild_id is not None
        session = self._service.get(interaction.guild_id)
        self._record(interaction, "voice status", session is not None)
        if session is None:
            await interaction.response.send_message("I am not in a voice channel.", ephemeral=True)
            return
        names: dict[str, str] = {}
        if interaction.guild is not None:
            for uid in session.status()["speakers"]:
                m = interaction.guild.get_member(int(uid))
                if m is not None:
                    names[uid] = m.display_name
        text = format_status(session.status(), names)
        if self._broker is not None:
            text += f"\nActions: {self._broker.settings.containment}"
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="actions", description="Recent actions and their status")
    async def actions(self, interaction: discord.Interaction) -> None:
        assert interaction.guild_id is not None
        self._record(interaction, "voice actions", self._broker is not None)
        if self._broker is None:
            await interaction.response.send_message(_ACTIONS_OFF, ephemeral=True)
            return
        recent = await self._broker.recent(interaction.guild_id)
        await interaction.response.send_message(format_actions(recent), ephemeral=True)

    @app_commands.command(name="cancel", description="Cancel an action")
    @app_commands.describe(action_id="The action id, e.g. a-1f3c9e2b")
    async def cancel(self, interaction: discord.Interaction, action_id: str) -> None:
        if self._broker is None:
            self._record(interaction, "voice cancel", False, "actions off")
            await interaction.response.send_message(_ACTIONS_OFF, ephemeral=True)
            return
        outcome = await self._broker.cancel(action_id.strip(), user_id=interaction.user.id)
        self._record(interaction, "voice cancel", outcome.ok, outcome.code or action_id)
        await interaction.response.send_message(outcome.message, ephemeral=True)

    @app_commands.command(
        name="reconcile", description="Free a quarantined workspace after checking it (operator)"
    )
    @app_commands.describe(action_id="The action whose workspace you checked")
    async def reconcile(self, interaction: discord.Interaction, action_id: str) -> None:
        if self._broker is None:
            self._record(interaction, "voice reconcile", False, "actions off")
            await interaction.response.send_message(_ACTIONS_OFF, ephemeral=True)
            return
        outcome = await self._broker.reconcile(action_id.strip(), user_id=interaction.user.id)
        self._record(interaction, "voice reconcile", outcome.ok, outcome.code or action_id)
        await interaction.response.send_message(outcome.message, ephemeral=True)

    async def _resolve(self, interaction: discord.Interaction, command: str, session: str | None) -> Any:
        """The stored session ``session`` names (default: the current or latest), or None once refused."""
        assert interaction.guild_id is not None
        live = self._service.get(interaction.guild_id)
        found = await self._records.resolve(
            guild_id=interaction.guild_id,
            user_id=interaction.user.id,
            session_id=session,
            live_id=live.id if live is not None else None,
            live_audience=live.listeners() if live is not None else (),
        )
        if isinstance(found, Refusal):
            self._record(interaction, command, False, found.reason)
            await interaction.response.send_message(found.reason, ephemeral=True)
            return None
        return found

    @app_commands.command(name="transcript", description="The stored transcript of a voice session, as files")
    @app_commands.describe(session="The session id (default: the current or latest session)")
    async def transcript(self, interaction: discord.Interaction, session: str | None = None) -> None:
        found = await self._resolve(interaction, "voice transcript", session)
        if found is None:
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        export = await self._records.export(found)
        stem = f"transcript-{found.id}"
        files = [
            discord.File(io.BytesIO(export.text.encode()), filename=f"{stem}.txt"),
            discord.File(io.BytesIO(export.json.encode()), filename=f"{stem}.json"),
        ]
        self._record(interaction, "voice transcript", True, found.id)
        await interaction.followup.send(
            f"Transcript of session `{found.id}` in #{found.channel_name}: {export.lines} lines.",
            files=files,
            ephemeral=True,
        )

    @app_commands.command(name="summary", description="A summary of a voice session, posted here")
    @app_commands.describe(session="The session id (default: the current or latest session)")
    async def summary(self, interaction: discord.Interaction, session: str | None = None) -> None:
        found = await self._resolve(interaction, "voice summary", session)
        if found is None:
            return
        await interaction.response.defer(thinking=True)
        result = await self._records.summarize(found)
        if isinstance(result, Refusal):
            self._record(interaction, "voice summary", False, result.reason)
            await interaction.followup.send(result.reason)
            return
        self._record(interaction, "voice summary", True, found.id)
        note = " (its most recent part)" if result.truncated else ""
        text = f"**Summary of session `{found.id}` in #{found.channel_name}{note}**\n{result.text}"
        for chunk in split_message(text):
            await interaction.followup.send(chunk)

    @app_commands.command(
        name="memory", description="What I remember about you here; forget a record by its id"
    )
    @app_commands.describe(forget="The id of a record to forget (yours, or any for the operator)")
    async def memory_command(self, interaction: discord.Interaction, forget: int | None = None) -> None:
        assert interaction.guild_id is not None
        memory = self._memory
        if memory is None:
            self._record(interaction, "voice memory", False, "memory off")
            await interaction.response.send_message(
                "Long-term memory is off (OPENAB_MEMORY_ENABLED).", ephemeral=True
            )
            return
        user_id = interaction.user.id
        if forget is not None:
            refused = await asyncio.to_thread(
                memory.forget,
                forget,
                guild_id=interaction.guild_id,
                user_id=user_id,
                operator_id=self._operator_id,
            )
            self._record(interaction, "voice memory", refused is None, refused or f"forgot {forget}")
            text = f"Forgotten: memory {forget}." if refused is None else f"Not forgotten: {refused}."
            await interaction.response.send_message(text, ephemeral=True)
            return
        mine = None if user_id == self._operator_id else str(user_id)
        records = await asyncio.to_thread(memory.recent, guild_id=interaction.guild_id, speaker_id=mine)
        self._record(interaction, "voice memory", True, f"{len(records)} records")
        if not memory.health.ok:
            text = f"Memory is unavailable: {memory.health.reason}."
        elif not records:
            text = "I remember nothing about you here." if mine else "I remember nothing here."
        else:
            lines = [
                f"`{r.id}` {r.kind} · <@{r.speaker_id}> · "
                f"{datetime.fromtimestamp(r.created_at, tz=UTC).date().isoformat()} · {r.text}"
                for r in records
            ]
            text = "\n".join(lines) + "\nForget one with `/voice memory forget:<id>`."
        await interaction.response.send_message(split_message(text)[0], ephemeral=True)


def split_message(text: str, limit: int = _MESSAGE_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at line ends where there are any."""
    chunks: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        cut = cut if cut > 0 else limit
        chunks.append(text[:cut])
        text = text[cut:].lstrip("\n")
    if text:
        chunks.append(text)
    return chunks


def format_actions(actions: Sequence[ActionRecord]) -> str:
    """``/voice actions`` text: newest first, one line each."""
    if not actions:
        return "No actions yet."
    lines = []
    for a in actions:
        goal = a.goal if len(a.goal) <= 80 else a.goal[:79] + "…"
        lines.append(f"`{a.id}` **{a.status.value}** · by <@{a.proposed_by}> · {goal}")
    return "\n".join(lines)
