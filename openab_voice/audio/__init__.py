"""Audio: ``AudioFrame``, bounded timestamped rings, resampling, the WebRTC front end (APM), VAD and
the per-speaker pipeline that turns decoded Discord audio into processed capture."""

from openab_voice.audio.frame import DISCORD_CHANNELS, DISCORD_FRAME_SAMPLES, DISCORD_RATE, AudioFrame

__all__ = ["DISCORD_CHANNELS", "DISCORD_FRAME_SAMPLES", "DISCORD_RATE", "AudioFrame"]
