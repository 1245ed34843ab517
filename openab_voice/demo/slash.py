"""``/voice`` commands as scenario events: parsed and checked against the command group itself.

A scenario writes a command as Discord's client shows it: ``"voice memory forget:12"``. Options are
``name:value`` words; a bare word fills the next option in the command's own order, so
``"voice cancel a-1f3c9e2b"`` still works. The commands and their options are read from
:class:`~openab_voice.discord.host.commands.VoiceCommands`, the group the bot syncs, so a command added
there is a scenario event with no change here.

Two values are filled in when the demo runs, because a scenario cannot know them in advance: a
missing ``action_id`` is the newest action the channel mentions, and a channel option takes the
channel's name (``channel:Voice``) or ``voice`` / ``text`` for the emulator's two channels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from discord import AppCommandOptionType, app_commands

from openab_voice.bus import EventBus
from openab_voice.clock import SystemClock
from openab_voice.discord.host.commands import VoiceCommands
from openab_voice.discord.host.service import VoiceService, VoiceSessions
from openab_voice.discord.host.session import VoiceSession

__all__ = ["FILLED_LATER", "OptionSpec", "SlashCall", "parse_slash", "voice_commands"]

GROUP: Final = "voice"
FILLED_LATER: Final = frozenset({"action_id"})  # required, yet the runner can supply it

OptionKind = Literal["string", "integer", "number", "boolean", "channel"]
OptionValue = str | int | float | bool

_KINDS: Final[dict[AppCommandOptionType, OptionKind]] = {
    AppCommandOptionType.string: "string",
    AppCommandOptionType.integer: "integer",
    AppCommandOptionType.number: "number",
    AppCommandOptionType.boolean: "boolean",
    AppCommandOptionType.channel: "channel",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionSpec:
    """One option of a ``/voice`` command, as the command group declares it."""

    name: str
    kind: OptionKind
    required: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SlashCall:
    """A parsed ``/voice`` scenario command: its subcommand and its typed options."""

    subcommand: str
    options: MappingProxyType[str, OptionValue] = field(default_factory=lambda: MappingProxyType({}))
    missing: tuple[str, ...] = ()  # required options the runner fills in (see FILLED_LATER)


def _never(channel: object, *, generation: int, text_channel_id: int | None) -> VoiceSession:
    raise AssertionError("the schema's voice service never joins")


@functools.cache
def voice_commands() -> MappingProxyType[str, tuple[OptionSpec, ...]]:
    """Every ``/voice`` subcommand and its options, read from the command group the bot syncs.

    The group is built on inert parts: its callbacks are never run here, only its declaration is read.
    """
    group = VoiceCommands(
        VoiceService(sessions=VoiceSessions(), factory=_never),
        broker=None,
        bus=EventBus(),
        clock=SystemClock(),
    )
    commands: dict[str, tuple[OptionSpec, ...]] = {}
    for command in group.commands:
        if not isinstance(command, app_commands.Command):
            raise AssertionError(f"/{GROUP} {command.name} is a subcommand group; scenarios take leaves")
        specs = []
        for parameter in command.parameters:
            kind = _KINDS.get(parameter.type)
            if kind is None:
                raise AssertionError(
                    f"/{GROUP} {command.name} {parameter.name}: option type {parameter.type}"
                )
            specs.append(OptionSpec(name=parameter.name, kind=kind, required=parameter.required))
        commands[command.name] = tuple(specs)
    return MappingProxyType(commands)


def parse_slash(text: str) -> SlashCall:
    """``"voice memory forget:12"`` -> the subcommand and its options, typed by the command's schema.

    Raises:
        ValueError: naming the unknown command, the unknown or repeated option, or the bad value.
    """
    commands = voice_commands()
    known = "|".join(commands)
    words = text.split()
    if len(words) < 2 or words[0] != GROUP:
        raise ValueError(f"slash must be '{GROUP} <{known}> [option:value ...]', got {text!r}")
    name, rest = words[1], words[2:]
    specs = commands.get(name)
    if specs is None:
        raise ValueError(f"no command '/{GROUP} {name}'; the /{GROUP} commands are {known}")
    by_name = {s.name: s for s in specs}
    values: dict[str, OptionValue] = {}
    positional = iter(specs)
    for word in rest:
        key, sep, raw = word.partition(":")
        if sep and key in by_name:
            spec = by_name[key]
        elif sep and key.isidentifier():
            options = ", ".join(by_name) or "none"
            raise ValueError(f"'/{GROUP} {name}' has no option {key!r} (its options: {options})")
        else:  # a bare word fills the next option not given yet
            following = next((s for s in positional if s.name not in values), None)
            if following is None:
                taken = f"only {', '.join(by_name)}" if by_name else "no options"
                raise ValueError(f"'/{GROUP} {name}' takes {taken}; {word!r} is one too many")
            spec, raw = following, word
        if spec.name in values:
            raise ValueError(f"'/{GROUP} {name}': option {spec.name!r} is given twice")
        values[spec.name] = _typed(name, spec, raw)
    absent = tuple(s.name for s in specs if s.required and s.name not in values)
    unfilled = [n for n in absent if n not in FILLED_LATER]
    if unfilled:
        raise ValueError(f"'/{GROUP} {name}' needs option(s) {unfilled}")
    return SlashCall(subcommand=name, options=MappingProxyType(values), missing=absent)


def _typed(command: str, spec: OptionSpec, raw: str) -> OptionValue:
    where = f"'/{GROUP} {command}' option {spec.name!r}"
    if not raw:
        raise ValueError(f"{where} is empty")
    match spec.kind:
        case "string" | "channel":
            return raw
        case "integer":
            try:
                return int(raw)
            except ValueError:
                raise ValueError(f"{where} takes a whole number, got {raw!r}") from None
        case "number":
            try:
                return float(raw)
            except ValueError:
                raise ValueError(f"{where} takes a number, got {raw!r}") from None
        case "boolean":
            if raw.lower() not in ("true", "false"):
                raise ValueError(f"{where} takes true or false, got {raw!r}")
            return raw.lower() == "true"
