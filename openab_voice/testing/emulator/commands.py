"""Registered application commands and the ``data`` of a slash-command invocation.

Options are typed from the schema the bot synced, as Discord's client does: a ``channel`` option
becomes type 7 with the channel in ``data.resolved.channels``, which discord.py's
``Namespace._get_resolved_items`` turns into an ``AppCommandChannel`` (``app_commands/namespace.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.models import GuildState, Snowflakes
from openab_voice.testing.emulator.wire import CommandBody, JsonObject

SUB_COMMAND = 1
SUB_COMMAND_GROUP = 2
STRING, INTEGER, BOOLEAN, USER, CHANNEL, ROLE, MENTIONABLE, NUMBER, ATTACHMENT = 3, 4, 5, 6, 7, 8, 9, 10, 11
CHAT_INPUT = 1


def _bad(message: str, **details: Any) -> EmulatorError:
    return EmulatorError(message, code=ErrorCode.EMULATOR_BAD_INVOCATION, **details)


class CommandRegistry:
    """What ``tree.sync()`` registered, globally and per guild.

    Args:
        application_id: the application the commands belong to.
        snowflakes: id source; a command keeps its id across syncs while its name stays.
    """

    def __init__(self, application_id: int, snowflakes: Snowflakes) -> None:
        self._app_id = application_id
        self._ids = snowflakes
        self._global: dict[str, JsonObject] = {}
        self._guild: dict[int, dict[str, JsonObject]] = {}

    def replace(self, bodies: list[CommandBody], *, guild_id: int | None) -> list[JsonObject]:
        """Bulk-overwrite one scope (``PUT .../commands``); returns the stored commands."""
        old = self._global if guild_id is None else self._guild.get(guild_id, {})
        new: dict[str, JsonObject] = {}
        for body in bodies:
            name = body["name"]
            if name in new:
                raise _bad(f"duplicate command name {name!r}")
            previous = old.get(name)
            command: JsonObject = {
                **copy.deepcopy(dict(body)),
                "id": previous["id"] if previous else str(self._ids.next()),
                "application_id": str(self._app_id),
                "version": str(self._ids.next()),
                "type": body.get("type", CHAT_INPUT),
                "description": body.get("description", ""),
                "options": copy.deepcopy(list(body.get("options", []))),
            }
            if guild_id is not None:
                command["guild_id"] = str(guild_id)
            new[name] = command
        if guild_id is None:
            self._global = new
        else:
            self._guild[guild_id] = new
        return [copy.deepcopy(c) for c in new.values()]

    def in_scope(self, *, guild_id: int | None) -> list[JsonObject]:
        scope = self._global if guild_id is None else self._guild.get(guild_id, {})
        return [copy.deepcopy(c) for c in scope.values()]

    def all(self) -> list[JsonObject]:
        """Every registered command, global first."""
        commands = list(self._global.values())
        for scope in self._guild.values():
            commands.extend(scope.values())
        return [copy.deepcopy(c) for c in commands]

    def find(self, name: str, *, guild_id: int) -> JsonObject:
        """A guild command shadows a global one of the same name, as in Discord's client."""
        command = self._guild.get(guild_id, {}).get(name) or self._global.get(name)
        if command is None:
            raise _bad(f"no command {name!r} is registered; sync the command tree first", command=name)
        return command

    def invocation_data(
        self,
        state: GuildState,
        name: str,
        *,
        subcommand: str | None,
        options: Mapping[str, Any] | None,
    ) -> JsonObject:
        """The ``data`` object of a slash-command INTERACTION_CREATE.

        Args:
            subcommand: ``"join"`` or, for a subcommand group, ``"group join"``.
            options: option name -> value; user, channel, role and mentionable options take ids.

        Raises:
            EmulatorError: ``EMULATOR_BAD_INVOCATION`` when the command, subcommand or an option does
                not match the registered schema.
        """
        command = self.find(name, guild_id=state.ids.guild_id)
        if command.get("type", CHAT_INPUT) != CHAT_INPUT:
            raise _bad(f"command {name!r} is not a slash command")
        schema: list[JsonObject] = command.get("options", [])
        path = subcommand.split() if subcommand else []
        if len(path) > 2:
            raise _bad(f"subcommand path {subcommand!r} is deeper than group + subcommand")
        resolved: JsonObject = {}
        leaf_options = self._leaf_options(state, schema, path, dict(options or {}), resolved)
        data: JsonObject = {"id": command["id"], "name": name, "type": CHAT_INPUT, "options": leaf_options}
        if resolved:
            data["resolved"] = resolved
        if "guild_id" in command:
            data["guild_id"] = command["guild_id"]
        return data

    def _leaf_options(
        self,
        state: GuildState,
        schema: list[JsonObject],
        path: list[str],
        values: dict[str, Any],
        resolved: JsonObject,
    ) -> list[JsonObject]:
        if not path:
            if any(o.get("type") in (SUB_COMMAND, SUB_COMMAND_GROUP) for o in schema):
                raise _bad("this command needs a subcommand")
            return _typed_options(state, schema, values, resolved)
        head, rest = path[0], path[1:]
        wanted = SUB_COMMAND_GROUP if rest else SUB_COMMAND
        match = next((o for o in schema if o.get("name") == head and o.get("type") == wanted), None)
        if match is None:
            kind = "subcommand group" if rest else "subcommand"
            raise _bad(f"no {kind} {head!r} is registered", subcommand=head)
        inner = self._leaf_options(state, match.get("options", []), rest, values, resolved)
        return [{"name": head, "type": wanted, "options": inner}]


def _typed_options(
    state: GuildState, schema: list[JsonObject], values: dict[str, Any], resolved: JsonObject
) -> list[JsonObject]:
    by_name = {o["name"]: o for o in schema}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise _bad(f"unknown options {unknown}", options=unknown)
    missing = [o["name"] for o in schema if o.get("required") and o["name"] not in values]
    if missing:
        raise _bad(f"required options missing: {missing}", options=missing)
    out: list[JsonObject] = []
    for name, value in values.items():
        spec = by_name[name]
        kind = int(spec.get("type", STRING))
        out.append({"name": name, "type": kind, "value": _option_value(state, spec, kind, value, resolved)})
    return out


def _option_value(state: GuildState, spec: JsonObject, kind: int, value: Any, resolved: JsonObject) -> Any:
    name = spec["name"]
    if kind == STRING and isinstance(value, str):
        result: Any = value
    elif (
        kind == INTEGER and isinstance(value, int) or kind == NUMBER and isinstance(value, int | float)
    ) and (not isinstance(value, bool)):
        result = value
    elif kind == BOOLEAN and isinstance(value, bool):
        return value
    elif kind in (USER, CHANNEL, ROLE, MENTIONABLE):
        return str(_resolve_snowflake(state, kind, name, value, resolved))
    else:
        raise _bad(f"option {name!r} (type {kind}) cannot take {value!r}", option=name)
    choices = spec.get("choices")
    if choices and result not in [c.get("value") for c in choices]:
        raise _bad(f"option {name!r} must be one of its choices, got {value!r}", option=name)
    return result


def _resolve_snowflake(state: GuildState, kind: int, name: str, value: Any, resolved: JsonObject) -> int:
    try:
        target = int(getattr(value, "id", value))
    except (TypeError, ValueError):
        raise _bad(f"option {name!r} takes an id, got {value!r}", option=name) from None
    if kind in (USER, MENTIONABLE) and target in state.users:
        user = state.users[target]
        resolved.setdefault("users", {})[str(target)] = payloads.user_payload(user)
        member = payloads.member_payload(state, user, with_user=False)
        member["permissions"] = payloads.ALL_PERMISSIONS
        resolved.setdefault("members", {})[str(target)] = member
    elif kind in (ROLE, MENTIONABLE) and target == state.ids.guild_id:
        resolved.setdefault("roles", {})[str(target)] = payloads.everyone_role(state)
    elif kind == CHANNEL and target in state.channel_ids():
        channel = payloads.channel_payload(state, target)
        channel["permissions"] = payloads.ALL_PERMISSIONS
        resolved.setdefault("channels", {})[str(target)] = channel
    else:
        raise _bad(f"option {name!r}: no such user, channel or role {target}", option=name)
    return target
