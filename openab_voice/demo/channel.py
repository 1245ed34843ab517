"""The demo report's text channel: what the emulator's channel holds, and every interaction's reply.

Ephemeral replies never reach the channel (only their user sees them), so they are taken from the
interactions the emulator recorded and shown beside the channel's messages, in creation order (a
message id is a snowflake), marked with the one user who sees them. A reply names the command it
answers; attached files are listed by name and size, never their bodies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openab_voice.testing.emulator import DiscordEmulator
from openab_voice.testing.emulator.interactions import Interaction
from openab_voice.testing.emulator.payloads import MESSAGE_FLAG_EPHEMERAL
from openab_voice.testing.emulator.wire import JsonObject

__all__ = ["text_channel_report"]


def _ephemeral(message: JsonObject) -> bool:
    return bool(int(message.get("flags") or 0) & MESSAGE_FLAG_EPHEMERAL)


def _answers(interaction: Interaction) -> list[JsonObject]:
    """The messages the bot answered ``interaction`` with (a click's updated proposal is not one)."""
    found = []
    original = interaction.original
    if original is not None and original.get("id") != str(interaction.source_message_id):
        found.append(original)
    found.extend(interaction.followups)  # the first one after a deferral is the original itself
    return found


def text_channel_report(emulator: DiscordEmulator, names: Mapping[int, str]) -> list[dict[str, Any]]:
    """Every message of the text channel and every ephemeral reply, oldest first.

    Args:
        names: user id -> display name, for who invoked a command and who sees an ephemeral reply.
    """
    pinned = set(emulator.pins())
    answering: dict[int, Interaction] = {}
    messages = {int(m["id"]): m for m in emulator.messages()}
    for interaction in emulator.interactions:
        for message in _answers(interaction):
            answering[int(message["id"])] = interaction
            if _ephemeral(message):
                messages[int(message["id"])] = message
    return [_entry(m, pinned, answering.get(i), names) for i, m in sorted(messages.items())]


def _entry(
    message: JsonObject, pinned: set[int], interaction: Interaction | None, names: Mapping[int, str]
) -> dict[str, Any]:
    buttons = [
        {"label": b.get("label"), "custom_id": b.get("custom_id"), "disabled": bool(b.get("disabled"))}
        for row in message.get("components") or []
        for b in row.get("components") or []
    ]
    author = message.get("author") or {}
    ephemeral = _ephemeral(message)
    user = None if interaction is None else names.get(interaction.user_id, str(interaction.user_id))
    command = None if interaction is None else interaction.command_text
    return {
        "id": str(message["id"]),
        "author": author.get("username", str(author.get("id", ""))),
        "content": message.get("content", ""),
        "pinned": int(message["id"]) in pinned,
        "components": buttons,
        "ephemeral": ephemeral,
        "visible_to": user if ephemeral else None,
        "command": command,
        "command_by": user if command is not None else None,
        "attachments": [
            {"filename": a.get("filename"), "size": a.get("size")} for a in message.get("attachments") or []
        ],
    }
