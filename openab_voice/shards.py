"""Shard math: which discord.py shards, and so which guilds, one bot process owns.

Discord puts a guild on shard ``(guild_id >> 22) % count``. With ``OPENAB_SHARD_COUNT`` set, bot pod
``ordinal`` runs ``OPENAB_SHARDS_PER_POD`` consecutive shards from ``ordinal * per_pod``; its
:class:`ShardRange` scopes the guilds' voice sessions, proposals and result deliveries. The settings
themselves are declared and checked in :mod:`openab_voice.config`.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Protocol

from openab_voice.errors import ConfigError


class ShardSettings(Protocol):
    """The settings the shard math reads (:class:`~openab_voice.config.Settings` has them)."""

    @property
    def shard_count(self) -> int | None: ...

    @property
    def shards_per_pod(self) -> int: ...

    @property
    def shard_ordinal(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class ShardRange:
    """The discord.py shards one bot process runs, out of ``count``; it owns their guilds' voice
    sessions, proposals and result deliveries."""

    ids: tuple[int, ...]
    count: int

    def owns(self, guild_id: int) -> bool:
        return shard_of(guild_id, self.count) in self.ids


def shard_of(guild_id: int, count: int) -> int:
    """The shard of ``guild_id`` among ``count`` (Discord's rule: ``(guild_id >> 22) % count``)."""
    return (guild_id >> 22) % count


def shard_range(settings: ShardSettings, *, hostname: str | None = None) -> ShardRange | None:
    """This process's shards: pod ``ordinal`` runs ``ordinal * per_pod`` up to the next pod's first.

    The ordinal is ``OPENAB_SHARD_ORDINAL``, else the ``N`` of a StatefulSet pod's host name
    (``openab-bot-N``). None when ``OPENAB_SHARD_COUNT`` is unset: one process, every guild.

    Raises:
        ConfigError: naming ``OPENAB_SHARD_ORDINAL`` when there is no ordinal, or it is past the last pod.
    """
    if settings.shard_count is None:
        return None
    ordinal = settings.shard_ordinal
    if ordinal is None:
        name = socket.gethostname() if hostname is None else hostname
        found = re.fullmatch(r".*-(\d+)", name)
        if found is None:
            raise ConfigError(
                f"OPENAB_SHARD_ORDINAL is unset and the host name {name!r} does not end in -N "
                "(a StatefulSet pod's)",
                setting="OPENAB_SHARD_ORDINAL",
            )
        ordinal = int(found.group(1))
    first = ordinal * settings.shards_per_pod
    if first >= settings.shard_count:
        raise ConfigError(
            f"OPENAB_SHARD_ORDINAL: pod {ordinal} has no shard ({settings.shard_count} shards, "
            f"{settings.shards_per_pod} per pod: pods 0-{pod_count(settings) - 1})",
            setting="OPENAB_SHARD_ORDINAL",
        )
    last = min(first + settings.shards_per_pod, settings.shard_count)
    return ShardRange(ids=tuple(range(first, last)), count=settings.shard_count)


def pod_count(settings: ShardSettings) -> int:
    """Bot pods the shards fill: ``shard_count / shards_per_pod``, rounded up (1 without shards)."""
    count = settings.shard_count or 1
    return -(-count // settings.shards_per_pod)
