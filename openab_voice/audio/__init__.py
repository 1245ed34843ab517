"""Audio: ``AudioFrame``, bounded timestamped rings, resampling, the WebRTC front end (APM), VAD and
the per-speaker pipeline that turns decoded Discord audio into processed capture.

Entry point: :class:`FrontEnd` (``push_capture`` / ``push_render`` / ``subscribe``), configured by
:class:`FrontEndSettings`; its events live in :mod:`openab_voice.audio.events`.
"""

from openab_voice.audio.capture_stream import ProcessedCaptureStream
from openab_voice.audio.events import (
    AudioBufferOverrun,
    AudioPipelineStarted,
    AudioPipelineStopped,
    AudioProcessingError,
    AudioReferenceDrift,
    AudioReferenceRealigned,
    EchoCouplingDetected,
    EchoGateDecision,
    SpeechEnded,
    SpeechStarted,
)
from openab_voice.audio.frame import (
    DISCORD_CHANNELS,
    DISCORD_FRAME_SAMPLES,
    DISCORD_RATE,
    AudioFrame,
    ProcessedFrame,
)
from openab_voice.audio.frontend import FrontEnd
from openab_voice.audio.pipeline import SpeakerPipeline
from openab_voice.audio.settings import FrontEndSettings

__all__ = [
    "DISCORD_CHANNELS",
    "DISCORD_FRAME_SAMPLES",
    "DISCORD_RATE",
    "AudioBufferOverrun",
    "AudioFrame",
    "AudioPipelineStarted",
    "AudioPipelineStopped",
    "AudioProcessingError",
    "AudioReferenceDrift",
    "AudioReferenceRealigned",
    "EchoCouplingDetected",
    "EchoGateDecision",
    "FrontEnd",
    "FrontEndSettings",
    "ProcessedCaptureStream",
    "ProcessedFrame",
    "SpeakerPipeline",
    "SpeechEnded",
    "SpeechStarted",
]
