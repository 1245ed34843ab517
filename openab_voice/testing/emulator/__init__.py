"""A loopback Discord (REST, gateway, voice gateway, voice UDP, DAVE) that unmodified discord.py logs into."""

from openab_voice.errors import UnknownHostError
from openab_voice.testing.emulator.bot_audio import BotAudioSink
from openab_voice.testing.emulator.clients import build_client, running_client
from openab_voice.testing.emulator.config import EmulatorConfig
from openab_voice.testing.emulator.echo import EchoPath
from openab_voice.testing.emulator.impairments import Impairments
from openab_voice.testing.emulator.interactions import Interaction, InteractionReply
from openab_voice.testing.emulator.resolver import EmulatorResolver
from openab_voice.testing.emulator.rtp_stream import SendReport, prepare_speech
from openab_voice.testing.emulator.server import DiscordEmulator
from openab_voice.testing.emulator.speakers import FakeSpeaker
from openab_voice.testing.emulator.voice_connection import VoiceSessionInfo
from openab_voice.testing.emulator.voice_events import VOICE_ACTIONS, VoiceEvent
from openab_voice.testing.emulator.voice_status import VoiceStatusSet
from openab_voice.testing.emulator.wav import load_wav_48k_stereo

__all__ = [
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
    "VOICE_ACTIONS",
    "UnknownHostError",
    "VoiceEvent",
    "VoiceSessionInfo",
    "VoiceStatusSet",
    "build_client",
    "load_wav_48k_stereo",
    "prepare_speech",
    "running_client",
]
