"""Discord JSON objects rendered from the emulator's state.

Each field listed here is one discord.py 2.7.1 reads with ``data[...]`` (a ``KeyError`` otherwise) or one
whose absence changes its behaviour; see ``shared/notes/discord-voice-protocol.md`` §2.
"""

from __future__ import annotations

from typing import Any

from openab_voice.testing.emulator.models import GuildState, UserRecord
from openab_voice.testing.emulator.responses import Upload
from openab_voice.testing.emulator.wire import JsonObject

# Every permission bit Discord defines today: the emulator never denies anything, but for the views
# a test takes away (``DiscordEmulator.set_channel_view``).
ALL_PERMISSIONS = "2251799813685247"
ADMINISTRATOR = 1 << 3
VIEW_CHANNEL = 1 << 10
# @everyone has every permission but ADMINISTRATOR, which would override any channel overwrite.
EVERYONE_PERMISSIONS = str(int(ALL_PERMISSIONS) & ~ADMINISTRATOR)
MEMBER_OVERWRITE = 1
TEXT_CHANNEL = 0
VOICE_CHANNEL = 2
MESSAGE_FLAG_EPHEMERAL = 1 << 6
MESSAGE_FLAG_LOADING = 1 << 7


def user_payload(user: UserRecord) -> JsonObject:
    return {
        "id": str(user.id),
        "username": user.name,
        "discriminator": "0",
        "global_name": user.name,
        "avatar": None,
        "bot": user.bot,
        "system": False,
        "flags": 0,
        "public_flags": 0,
    }


def bot_user_payload(user: UserRecord) -> JsonObject:
    """``GET /users/@me`` and READY's ``user``: the client user has a few more fields."""
    return {**user_payload(user), "verified": True, "mfa_enabled": False, "email": None, "locale": "en-US"}


def member_payload(state: GuildState, user: UserRecord, *, with_user: bool = True) -> JsonObject:
    data: JsonObject = {
        "roles": [],
        "joined_at": state.created_at,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "nick": None,
        "avatar": None,
        "pending": False,
        "premium_since": None,
        "communication_disabled_until": None,
    }
    if with_user:
        data["user"] = user_payload(user)
    return data


def everyone_role(state: GuildState) -> JsonObject:
    return {
        "id": str(state.ids.guild_id),
        "name": "@everyone",
        "permissions": EVERYONE_PERMISSIONS,
        "position": 0,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }


def overwrites(state: GuildState, channel_id: int) -> list[JsonObject]:
    """A member overwrite denying VIEW_CHANNEL for each user the channel is hidden from."""
    return [
        {"id": str(uid), "type": MEMBER_OVERWRITE, "allow": "0", "deny": str(VIEW_CHANNEL)}
        for uid in sorted(state.hidden.get(channel_id, ()))
    ]


def text_channel(state: GuildState) -> JsonObject:
    return {
        "id": str(state.ids.text_channel_id),
        "type": TEXT_CHANNEL,
        "name": "general",
        "position": 0,
        "guild_id": str(state.ids.guild_id),
        "permission_overwrites": overwrites(state, state.ids.text_channel_id),
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "flags": 0,
    }


def voice_channel(state: GuildState) -> JsonObject:
    return {
        "id": str(state.ids.voice_channel_id),
        "type": VOICE_CHANNEL,
        "name": "Voice",
        "position": 1,
        "guild_id": str(state.ids.guild_id),
        "permission_overwrites": overwrites(state, state.ids.voice_channel_id),
        "nsfw": False,
        "parent_id": None,
        "bitrate": 64000,
        "user_limit": 0,
        "rtc_region": None,
        "rate_limit_per_user": 0,
        "flags": 0,
    }


def channel_payload(state: GuildState, channel_id: int) -> JsonObject:
    if channel_id == state.ids.voice_channel_id:
        return voice_channel(state)
    return text_channel(state)


def voice_state_payload(state: GuildState, user: UserRecord, *, channel_id: int | None) -> JsonObject:
    return {
        "guild_id": str(state.ids.guild_id),
        "channel_id": None if channel_id is None else str(channel_id),
        "user_id": str(user.id),
        "session_id": user.voice_session_id or f"voice-session-{user.id}",
        "deaf": False,
        "mute": False,
        "self_deaf": False,
        "self_mute": False,
        "self_video": False,
        "self_stream": False,
        "suppress": False,
        "request_to_speak_timestamp": None,
        "member": member_payload(state, user),
    }


def guild_create(state: GuildState) -> JsonObject:
    members = list(state.users.values())
    return {
        "id": str(state.ids.guild_id),
        "name": "Emulated Guild",
        "icon": None,
        "splash": None,
        "discovery_splash": None,
        "banner": None,
        "description": None,
        "owner_id": str(state.ids.bot_user_id),
        "afk_channel_id": None,
        "afk_timeout": 300,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "nsfw_level": 0,
        "premium_tier": 0,
        "premium_subscription_count": 0,
        "preferred_locale": "en-US",
        "system_channel_id": None,
        "system_channel_flags": 0,
        "rules_channel_id": None,
        "public_updates_channel_id": None,
        "vanity_url_code": None,
        "max_members": 500000,
        "roles": [everyone_role(state)],
        "channels": [text_channel(state), voice_channel(state)],
        "members": [member_payload(state, u) for u in members],
        "voice_states": [
            {
                k: v
                for k, v in voice_state_payload(state, u, channel_id=state.ids.voice_channel_id).items()
                if k != "member"
            }
            for u in members
            if u.in_voice
        ],
        "member_count": len(members),
        "unavailable": False,
        "large": False,
        "lazy": True,
        "features": [],
        "emojis": [],
        "stickers": [],
        "threads": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
        "presences": [],
        "joined_at": state.created_at,
        "premium_progress_bar_enabled": False,
    }


def message_payload(
    state: GuildState,
    *,
    message_id: int,
    channel_id: int,
    author: UserRecord,
    body: Any,
    message_type: int = 0,
    webhook_id: int | None = None,
    interaction_metadata: JsonObject | None = None,
) -> JsonObject:
    """A new message from a validated :class:`wire.MessageBody` (``body`` is that mapping)."""
    data: JsonObject = {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "guild_id": str(state.ids.guild_id),
        "author": user_payload(author),
        "member": member_payload(state, author, with_user=False),
        "content": body.get("content") or "",
        "timestamp": state.iso_now(),
        "edited_timestamp": None,
        "tts": bool(body.get("tts", False)),
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": list(body.get("embeds") or []),
        "pinned": False,
        "type": message_type,
        "flags": int(body.get("flags") or 0),
        "components": list(body.get("components") or []),
    }
    if webhook_id is not None:
        data["webhook_id"] = str(webhook_id)
    if interaction_metadata is not None:
        data["interaction_metadata"] = interaction_metadata
    nonce = body.get("nonce")
    if nonce is not None:
        data["nonce"] = nonce
    return data


def attachments_payload(state: GuildState, message: JsonObject, uploads: list[Upload]) -> list[JsonObject]:
    """The ``attachments`` of a message the bot sent files with (the bytes stay with the interaction)."""
    result: list[JsonObject] = []
    for upload in uploads:
        attachment_id = state.snowflakes.next()
        url = f"https://cdn.emulator.invalid/attachments/{message['channel_id']}/{attachment_id}/{upload.filename}"
        result.append(
            {
                "id": str(attachment_id),
                "filename": upload.filename,
                "size": len(upload.data),
                "content_type": upload.content_type,
                "url": url,
                "proxy_url": url,
            }
        )
    return result


def apply_edit(state: GuildState, message: JsonObject, body: Any) -> JsonObject:
    """Apply a validated edit body in place; only the keys present change."""
    for key in ("content", "embeds", "components"):
        if key in body:
            value = body[key]
            message[key] = ("" if key == "content" else []) if value is None else value
    if body.get("flags") is not None:
        message["flags"] = int(body["flags"])
    message["edited_timestamp"] = state.iso_now()
    return message
