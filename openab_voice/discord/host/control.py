"""The control text channel on discord.py: pinned proposals with Confirm / Reject buttons, results.

Buttons carry ``openab:action:<decision>:<action id>`` custom ids (``confirm``, ``confirm_exec``,
``confirm_external``, ``reject``: only those the proposal offered) and no discord.py view
callback: clicks arrive as raw interactions (:meth:`VoiceBot.on_interaction`) and go to the broker,
which checks the clicking user against the operator, so a restart does not lose them.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import discord

from openab_voice.actions.ports import (
    CONFIRM,
    CONFIRM_EXEC,
    CONFIRM_EXTERNAL,
    REJECT,
    ProposalView,
    button_id,
)
from openab_voice.errors import DeliveryFailed

log = logging.getLogger(__name__)

_NO_MENTIONS = discord.AllowedMentions.none()


def proposal_text(proposal: ProposalView) -> str:
    """The proposal exactly as the operator reads it before confirming."""
    expires = datetime.fromtimestamp(proposal.expires_at, tz=UTC).strftime("%H:%M:%S UTC")
    return (
        f"**Action proposal `{proposal.action_id}`**\n"
        f"Requested by <@{proposal.proposed_by}> (by voice, {proposal.source})\n"
        f"Goal: {proposal.goal}\n"
        f"Effect ceiling: `{proposal.effect_ceiling}` · expires {expires}\n"
        + _exec_line(proposal)
        + _external_line(proposal)
        + (f"⚠ Containment: {proposal.containment_note}.\n" if proposal.containment_note else "")
        + "Nothing runs until the operator presses Confirm. A spoken yes approves nothing."
    )


def _exec_line(proposal: ProposalView) -> str:
    if proposal.offers_exec:
        return "**Confirm + run commands** grants `workspace_exec`: commands run inside the agent sandbox.\n"
    if proposal.exec_note:
        return f"Running commands is not offered: {proposal.exec_note}.\n"
    return ""


def _external_line(proposal: ProposalView) -> str:
    if proposal.offers_external:
        return (
            "**Confirm + network/external effects** grants `external`: network access and effects "
            "outside the workspace. The plain Confirm grants at most `workspace_write`.\n"
        )
    return ""


def _buttons(action_id: str, *, offers_exec: bool = False, offers_external: bool = False) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(
        discord.ui.Button(
            label="Confirm", style=discord.ButtonStyle.success, custom_id=button_id(CONFIRM, action_id)
        )
    )
    if offers_exec:
        view.add_item(
            discord.ui.Button(
                label="Confirm + run commands",
                style=discord.ButtonStyle.primary,
                custom_id=button_id(CONFIRM_EXEC, action_id),
            )
        )
    if offers_external:
        view.add_item(
            discord.ui.Button(
                label="Confirm + network/external effects",
                style=discord.ButtonStyle.secondary,
                custom_id=button_id(CONFIRM_EXTERNAL, action_id),
            )
        )
    view.add_item(
        discord.ui.Button(
            label="Reject", style=discord.ButtonStyle.danger, custom_id=button_id(REJECT, action_id)
        )
    )
    return view


class DiscordControlChannel:
    """:class:`~openab_voice.actions.ports.ControlChannel` on a discord.py client."""

    def __init__(self, client: discord.Client) -> None:
        self._client = client

    async def _channel(self, channel_id: int) -> discord.abc.Messageable:
        channel = self._client.get_channel(channel_id)
        if channel is None:
            try:
                channel = await self._client.fetch_channel(channel_id)
            except discord.DiscordException as exc:
                raise DeliveryFailed(f"control channel {channel_id} unavailable: {exc}") from exc
        if not isinstance(channel, discord.abc.Messageable):
            raise DeliveryFailed(f"channel {channel_id} cannot hold messages")
        return channel

    async def post_proposal(self, proposal: ProposalView) -> int:
        channel = await self._channel(proposal.channel_id)
        try:
            message = await channel.send(
                proposal_text(proposal),
                view=_buttons(
                    proposal.action_id,
                    offers_exec=proposal.offers_exec,
                    offers_external=proposal.offers_external,
                ),
                allowed_mentions=_NO_MENTIONS,
            )
        except discord.DiscordException as exc:
            raise DeliveryFailed(f"could not post the proposal: {exc}") from exc
        try:
            await message.pin(reason=f"action proposal {proposal.action_id}")
        except discord.DiscordException as exc:
            # Delivery means posted AND pinned: an unpinned proposal is withdrawn, not left confirmable.
            await _quietly_delete(message)
            raise DeliveryFailed(f"could not pin the proposal: {exc}") from exc
        return message.id

    async def close_proposal(self, *, channel_id: int, message_id: int, note: str) -> None:
        channel = await self._channel(channel_id)
        if not isinstance(channel, discord.TextChannel | discord.Thread | discord.VoiceChannel):
            return
        try:
            message = await channel.fetch_message(message_id)
            await message.edit(
                content=f"{message.content}\n**{note}**", view=None, allowed_mentions=_NO_MENTIONS
            )
        except discord.DiscordException as exc:
            raise DeliveryFailed(f"could not update the proposal: {exc}") from exc

    async def post_result(self, *, channel_id: int, parts: Sequence[str], attachment: str | None) -> int:
        channel = await self._channel(channel_id)
        sent = 0
        try:
            for i, part in enumerate(parts):
                file = None
                if attachment is not None and i == len(parts) - 1:
                    file = discord.File(io.BytesIO(attachment.encode()), filename="result.md")
                if file is None:
                    await channel.send(part, allowed_mentions=_NO_MENTIONS)
                else:
                    await channel.send(part, file=file, allowed_mentions=_NO_MENTIONS)
                sent += 1
        except discord.DiscordException as exc:
            raise DeliveryFailed(
                f"result delivery stopped after {sent} of {len(parts)} messages: {exc}"
            ) from exc
        return sent


async def _quietly_delete(message: discord.Message) -> None:
    try:
        await message.delete()
    except discord.DiscordException:
        log.warning("could not withdraw unpinned proposal message %s", message.id)
