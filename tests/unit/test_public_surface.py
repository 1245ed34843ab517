"""The public surface, pinned (httpx's ``test_exported_members``): what users import from
``openab_voice.testing.emulator`` (the loopback Discord they test their bots against) and
``openab_voice.app`` (the composition root the CLI, demo, benches and harness build through).

A change here is a change of the public API: make it on purpose, here and in the README.
"""

from __future__ import annotations

import dataclasses
import types

import pytest

import openab_voice.app
import openab_voice.testing.emulator

SURFACE = {
    openab_voice.testing.emulator: [
        "BotAudioSink",
        "DiscordEmulator",
        "EchoPath",
        "EmulatorConfig",
        "EmulatorResolver",
        "FakeSpeaker",
        "Impairments",
        "Interaction",
        "InteractionReply",
        "SendReport",
        "UnknownHostError",
        "VOICE_ACTIONS",
        "VoiceEvent",
        "VoiceSessionInfo",
        "VoiceStatusSet",
        "build_client",
        "load_wav_48k_stereo",
        "prepare_speech",
        "running_client",
    ],
    openab_voice.app: [
        "ActionParts",
        "Application",
        "EmulatorLink",
        "SessionFactory",
        "SessionOptions",
        "bot_token",
        "build_action_parts",
        "build_app",
        "build_providers",
        "check_providers",
        "frontend_settings",
        "probe_engine",
        "run_bot",
        "session_options",
    ],
}


@pytest.mark.parametrize("package", list(SURFACE), ids=lambda p: p.__name__)
def test_the_exported_names_are_the_pinned_ones(package: types.ModuleType) -> None:
    assert sorted(package.__all__) == sorted(SURFACE[package])
    # Every public attribute is exported, and nothing exported is missing (submodules aside).
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert public == set(package.__all__)


def test_the_emulator_config_fields_are_pinned() -> None:
    fields = {f.name for f in dataclasses.fields(openab_voice.testing.emulator.EmulatorConfig)}
    assert fields == EMULATOR_CONFIG_FIELDS


EMULATOR_CONFIG_FIELDS = {
    "advertise_loopback",
    "bot_name",
    "client_commits",
    "commit_wait_s",
    "dave",
    "gateway_rtt_ms",
    "heartbeat_interval_ms",
    "jitter_ms",
    "loss",
    "modes",
    "nat_timeout_s",
    "reorder",
    "seed",
    "speaking_lead_ms",
    "token",
}
