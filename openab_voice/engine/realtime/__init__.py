"""The realtime engine: a speech-to-speech provider (OpenAI Realtime) behind the
:class:`~openab_voice.engine.duplex.DuplexVoiceEngine` seam, with our core owning the turns.

``engine`` drives one conversation's responses; ``provider`` keeps the provider session alive
(connect, seed, read, reconnect); ``turn`` sends what the provider hears of a turn; ``response`` turns
one response's events into audio, sentences and tool rounds, and checks its claims; ``cuts`` cancels
and truncates (barge-in, false claims); ``audio`` holds the turns' capture and converts the
provider's audio; ``exact`` says status lines word for word with our TTS; ``session`` is the
provider's configuration and what the engine can do.
"""

from openab_voice.engine.realtime.engine import RealtimeEngine, realtime_engine
from openab_voice.engine.realtime.session import RealtimeSettings, realtime_capabilities, session_config

__all__ = ["RealtimeEngine", "RealtimeSettings", "realtime_capabilities", "realtime_engine", "session_config"]
