"""Shard settings: which shards a bot pod runs, from its StatefulSet ordinal; bad values fail at start-up
naming the setting."""

from __future__ import annotations

import pytest

from openab_voice.config import load_settings
from openab_voice.errors import ConfigError
from openab_voice.shards import ShardRange, shard_of, shard_range


def shards(hostname: str = "laptop", **env: str) -> ShardRange | None:
    return shard_range(load_settings({f"OPENAB_{k.upper()}": v for k, v in env.items()}), hostname=hostname)


def test_unset_is_one_process_holding_every_guild() -> None:
    assert shards() is None


@pytest.mark.parametrize(
    ("hostname", "ordinal", "expected"),
    [
        ("openab-bot-0", None, (0, 1)),
        ("openab-bot-1", None, (2, 3)),
        ("openab-bot-2", None, (4,)),  # the last pod takes what is left
        ("laptop", "1", (2, 3)),  # explicit ordinal, whatever the host is called
        ("openab-bot-2", "0", (0, 1)),  # explicit wins over the host name
    ],
)
def test_the_ordinal_picks_the_range(hostname: str, ordinal: str | None, expected: tuple[int, ...]) -> None:
    env = {"shard_count": "5", "shards_per_pod": "2"}
    if ordinal is not None:
        env["shard_ordinal"] = ordinal
    assert shards(hostname, **env) == ShardRange(ids=expected, count=5)


def test_every_guild_is_owned_by_exactly_one_pod() -> None:
    pods = [shards(f"openab-bot-{n}", shard_count="5", shards_per_pod="2") for n in range(3)]
    for guild_id in (0, 1 << 22, 2 << 22, 3 << 22, 4 << 22, 5 << 22, 1_300_000_000_007 << 22 | 7):
        assert [p.owns(guild_id) for p in pods if p is not None].count(True) == 1
    assert shard_of(7 << 22 | 0x3FFFFF, 5) == 2  # the low 22 bits do not count


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"shard_count": "0"}, "OPENAB_SHARD_COUNT"),
        ({"shard_count": "two"}, "OPENAB_SHARD_COUNT"),
        ({"shard_count": "2", "shards_per_pod": "3"}, "OPENAB_SHARDS_PER_POD"),
        ({"shard_count": "2", "shards_per_pod": "0"}, "OPENAB_SHARDS_PER_POD"),
        ({"shards_per_pod": "2"}, "OPENAB_SHARDS_PER_POD"),
        ({"shard_ordinal": "1"}, "OPENAB_SHARD_ORDINAL"),
        ({"shard_count": "4", "shards_per_pod": "2", "shard_ordinal": "2"}, "OPENAB_SHARD_ORDINAL"),
        ({"shard_count": "4", "shard_ordinal": "-1"}, "OPENAB_SHARD_ORDINAL"),
    ],
)
def test_bad_values_fail_naming_the_setting(env: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigError) as raised:
        shards("openab-bot-0", **env)
    assert raised.value.setting == setting, raised.value


@pytest.mark.parametrize("hostname", ["laptop", "openab-bot", "openab-bot-x"])
def test_no_ordinal_and_a_host_name_without_one_fails(hostname: str) -> None:
    with pytest.raises(ConfigError) as raised:
        shards(hostname, shard_count="2")
    assert raised.value.setting == "OPENAB_SHARD_ORDINAL" and hostname in str(raised.value)


def test_a_pod_past_the_last_shard_fails() -> None:
    with pytest.raises(ConfigError) as raised:
        shards("openab-bot-3", shard_count="5", shards_per_pod="2")
    assert raised.value.setting == "OPENAB_SHARD_ORDINAL" and "pods 0-2" in str(raised.value)


def test_an_empty_ordinal_is_absent_and_the_host_name_decides() -> None:
    """Before Kubernetes 1.28 the StatefulSet has no pod-index label: the fieldRef gives "" (issue 28)."""
    assert shards("openab-voice-bot-1", shard_count="2", shard_ordinal="") == ShardRange(ids=(1,), count=2)
