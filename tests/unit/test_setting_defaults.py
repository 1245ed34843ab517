"""One definition per knob (issue 30, ADR 0017): every ``OPENAB_*`` setting that the composition root
passes into a component has one default, the one its declaration holds and the README documents, and
the component's own default is that one. Tests build the components directly, the product builds them
from ``Settings``: both run on the same defaults."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openab_voice.acp.containment import Containment
from openab_voice.acp.pod import PodSettings
from openab_voice.actions.agents import AgentSettings
from openab_voice.actions.leases import LOCAL_ROLE, LeaseSettings
from openab_voice.actions.requests import BrokerSettings
from openab_voice.actions.worker import WorkerSettings
from openab_voice.app.actions import broker_settings, lease_settings, pod_settings
from openab_voice.app.providers import end_of_turn_settings
from openab_voice.app.records import RecordParts
from openab_voice.app.sessions import session_options
from openab_voice.app.worker import worker_settings
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.config import Settings, load_settings
from openab_voice.discord.wire.pipeline import ReceiverSettings
from openab_voice.discord.wire.playback import Playback
from openab_voice.engine.live import LiveSettings
from openab_voice.engine.realtime import RealtimeSettings
from openab_voice.engine.settings import DialogueMode, DialogueSettings
from openab_voice.jobs import EffectCeiling
from openab_voice.memory.long_term import LongTermMemory
from openab_voice.memory.meeting import MeetingRecords
from openab_voice.memory.recall import MemoryContext
from openab_voice.memory.tools import register_memory_tools
from openab_voice.providers.chat import ChatConfig
from openab_voice.providers.live import LiveConfig
from openab_voice.providers.realtime import RealtimeConfig
from openab_voice.providers.realtime_openai import realtime_config
from openab_voice.providers.tts import TtsConfig
from openab_voice.settings.names import env_name
from openab_voice.stt.base import SttConfig
from openab_voice.stt.endpointing import EndOfTurnSettings
from openab_voice.tools.router import RouterSettings

README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass(frozen=True)
class Pair:
    """``Settings.<setting>`` is passed (through ``convert``) into ``<owner>.<name>``."""

    setting: str
    owner: Callable[..., Any]
    name: str
    convert: Callable[[Any], Any] = lambda value: value

    def __str__(self) -> str:
        return f"{self.setting}->{getattr(self.owner, '__name__', self.owner)}.{self.name}"


PAIRS = [
    # app/sessions.py: the receiver, playback, the ToolRouter
    Pair("jitter_depth", ReceiverSettings, "jitter_depth"),
    Pair("max_conceal_frames", ReceiverSettings, "max_conceal"),
    Pair("pending_packets_per_ssrc", ReceiverSettings, "pending_per_ssrc"),
    Pair("pending_ttl_s", ReceiverSettings, "pending_ttl_s"),
    Pair("receive_queue_packets", ReceiverSettings, "inbox_packets"),
    Pair("udp_keepalive_s", ReceiverSettings, "udp_keepalive_s"),
    Pair("playback_buffer_ms", Playback, "buffer_ms"),
    Pair("tool_max_calls_per_turn", RouterSettings, "max_calls_per_turn"),
    Pair("tool_max_proposals_per_turn", RouterSettings, "max_proposals_per_turn"),
    Pair("tool_max_runtime_s_per_turn", RouterSettings, "max_runtime_s_per_turn"),
    Pair("tool_max_output_chars", RouterSettings, "max_output_chars"),
    # app/providers.py: the audio front end, the providers, the dialogue
    Pair("audio_rate", FrontEndSettings, "internal_rate"),
    Pair("apm_provider", FrontEndSettings, "apm_provider"),
    Pair("vad_provider", FrontEndSettings, "vad_provider"),
    Pair("echo_cancellation", FrontEndSettings, "echo_cancellation"),
    Pair("noise_suppression", FrontEndSettings, "noise_suppression"),
    Pair("auto_gain_control", FrontEndSettings, "auto_gain_control"),
    Pair("vad_min_silence_ms", FrontEndSettings, "vad_min_silence_ms"),
    Pair("turn_decide_after_ms", EndOfTurnSettings, "decide_after_ms"),
    Pair("turn_max_silence_ms", EndOfTurnSettings, "max_silence_ms"),
    Pair("turn_threshold", EndOfTurnSettings, "threshold"),
    Pair("audio_drift_tolerance_ms", FrontEndSettings, "drift_tolerance_ms"),
    Pair("audio_workers", FrontEndSettings, "workers"),
    Pair("stt_model", SttConfig, "model"),
    Pair("tts_voice", TtsConfig, "voice"),
    Pair("openai_live_model", LiveConfig, "model"),
    Pair("openai_live_voice", LiveConfig, "voice"),
    Pair("openai_live_voice", LiveSettings, "voice"),
    Pair("openai_live_backend_model", LiveSettings, "backend_model"),
    Pair("tts_first_chunk_words", TtsConfig, "first_chunk_words"),
    Pair("chat_model", ChatConfig, "model"),
    Pair("assistant_mode", DialogueSettings, "mode", DialogueMode),
    Pair("wake_name", DialogueSettings, "wake_name"),
    Pair("preemptive_generation", DialogueSettings, "preemptive_generation"),
    Pair("ignore_backchannels", DialogueSettings, "ignore_backchannels"),
    Pair("openai_realtime_model", RealtimeConfig, "model"),
    Pair("openai_realtime_voice", RealtimeConfig, "voice"),
    Pair("openai_realtime_voice", RealtimeSettings, "voice"),
    # app/records.py, app/bot.py: memory and the meeting record
    Pair("memory_top_k", RecordParts, "memory_top_k"),
    Pair("memory_top_k", MemoryContext, "top_k"),
    Pair("memory_top_k", register_memory_tools, "top_k"),
    Pair("memory_min_score", LongTermMemory, "min_score"),
    Pair("transcript_summary_chars", MeetingRecords, "summary_chars"),
    # app/actions.py, app/worker.py: broker, agents, pods, leases, workers
    Pair("action_expiry_s", BrokerSettings, "expiry_s"),
    Pair("action_max_effect", BrokerSettings, "max_effect", EffectCeiling),
    Pair("trusted_listener_ids", AgentSettings, "trusted_listener_ids", frozenset),
    Pair("acp_auth_method", AgentSettings, "auth_method"),
    Pair("action_pod_agent_secret", PodSettings, "agent_secret"),
    Pair("action_pod_service_account", PodSettings, "service_account"),
    Pair("action_pod_cpu", PodSettings, "cpu"),
    Pair("action_pod_memory", PodSettings, "memory"),
    Pair("action_pod_workspace_size", PodSettings, "workspace_size"),
    Pair("action_pod_storage_class", PodSettings, "storage_class"),
    Pair("action_pod_start_timeout_s", PodSettings, "start_timeout_s"),
    Pair("lease_s", LeaseSettings, "lease_s"),
    Pair("heartbeat_s", LeaseSettings, "heartbeat_s"),
    Pair("executor_concurrency", WorkerSettings, "concurrency"),
    Pair("executor_poll_s", WorkerSettings, "poll_s"),
    Pair("executor_drain_s", WorkerSettings, "drain_s"),
]

# Mapped, but the component's default means something else on purpose (the app always passes one):
# None is "the provider's own" (llama: 256), "the built-in prompt", "the host name", "keep forever";
# the pods' deadline is computed from three settings.
DIFFERENT_ON_PURPOSE = {
    "chat_max_tokens->ChatConfig.max_tokens",
    "system_prompt->DialogueSettings.system_prompt",
    "node_id->LeaseSettings.node",
    "transcript_retention_days->RecordParts.retention_s",
}


def component_default(owner: Callable[..., Any], name: str) -> Any:
    """The default a component is built with when ``name`` is not given."""
    if dataclasses.is_dataclass(owner):
        [field] = [f for f in dataclasses.fields(owner) if f.name == name]
        if field.default_factory is not dataclasses.MISSING:
            return field.default_factory()
        assert field.default is not dataclasses.MISSING, f"{owner.__name__}.{name} has no default"
        return field.default
    default = inspect.signature(owner).parameters[name].default
    assert default is not inspect.Parameter.empty, f"{owner.__name__}({name}=...) has no default"
    return default


def documented_defaults() -> dict[str, str]:
    """README's configuration table: environment variable -> its default cell (rows with several
    variables, ``A`` / ``B``, have one default each, in the same order)."""
    found: dict[str, str] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        defaults = [part.strip() for part in cells[1].split(" / ")]
        if len(defaults) != len(names):
            defaults = defaults[:1] * len(names)  # DISCORD_TOKEN / DISCORD_TOKEN_FILE: one value
        found.update(zip(names, defaults, strict=True))
    return found


def documents(cell: str, value: Any) -> bool:
    """Whether the README cell documents ``value``: one code span holding it, or prose for an unset
    default (None, nothing: what the program does then)."""
    is_value = re.fullmatch(r"`[^`]*`", cell) is not None
    if value is None or value == () or value == "":
        return not is_value
    if not is_value:
        return False
    text = cell.strip("`")
    if isinstance(value, bool):
        return text == str(value).lower()
    if isinstance(value, int | float):
        return float(text) == value
    if isinstance(value, tuple):
        return text == ",".join(value)
    return text == str(value)


DOCUMENTED = documented_defaults()
DECLARED = Settings.model_fields


@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_the_documented_default_is_the_declared_one_and_the_components(pair: Pair) -> None:
    declared = DECLARED[pair.setting].default
    name = env_name(pair.setting)
    assert name in DOCUMENTED, f"{name} is not in README's configuration table"
    assert documents(DOCUMENTED[name], declared), f"README documents {DOCUMENTED[name]} for {name}"
    assert pair.convert(declared) == component_default(pair.owner, pair.name), (
        f"{pair}: Settings declares {declared!r}, the component defaults to "
        f"{component_default(pair.owner, pair.name)!r}; make it read default_of(...)"
    )


def test_every_documented_default_is_the_declared_one() -> None:
    """Beyond the pairs: each value the README documents is the declaration's."""
    wrong = [
        f"README documents {DOCUMENTED[name]} for {name}, Settings declares {info.default!r}"
        for field, info in DECLARED.items()
        if (name := env_name(field)) in DOCUMENTED
        and info.default_factory is None
        and not documents(DOCUMENTED[name], info.default)
    ]
    assert not wrong


def test_the_known_differences_are_still_differences() -> None:
    """A difference listed as on purpose that is gone belongs in PAIRS."""
    declared = {
        "chat_max_tokens->ChatConfig.max_tokens": (96, ChatConfig, "max_tokens"),
        "system_prompt->DialogueSettings.system_prompt": (None, DialogueSettings, "system_prompt"),
        "node_id->LeaseSettings.node": (None, LeaseSettings, "node"),
        "transcript_retention_days->RecordParts.retention_s": (30.0, RecordParts, "retention_s"),
    }
    assert set(declared) == DIFFERENT_ON_PURPOSE
    for key, (value, owner, name) in declared.items():
        assert DECLARED[key.split("->")[0]].default == value
        assert component_default(owner, name) != value, key


def test_components_built_from_default_settings_are_built_with_their_own_defaults() -> None:
    settings = load_settings({})
    options = session_options(settings)
    assert options.receiver == ReceiverSettings()
    assert options.frontend == FrontEndSettings()
    assert end_of_turn_settings(settings) == EndOfTurnSettings()
    assert options.tool_router == RouterSettings()
    assert options.playback_buffer_ms == component_default(Playback, "buffer_ms")
    assert realtime_config(settings) == RealtimeConfig()
    assert worker_settings(settings) == WorkerSettings()
    lease = lease_settings(settings, role=LOCAL_ROLE)
    assert lease == LeaseSettings(node=lease.node)
    pods = pod_settings(settings.model_copy(update={"action_pod_image": "img"}), namespace="ns")
    assert pods == PodSettings(namespace="ns", image="img", deadline_s=pods.deadline_s)
    containment = Containment.remote()
    broker = broker_settings(settings.model_copy(update={"operator_user_id": 1}), containment)
    assert broker == BrokerSettings(
        operator_user_id=1,
        exec_unavailable=containment.exec_unavailable,
        refusal=containment.refusal,
        containment_notice=containment.notice,
        containment=containment.describe(),
    )
