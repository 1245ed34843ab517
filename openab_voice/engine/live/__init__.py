"""The live engine: OpenAI GPT-Live behind :class:`~openab_voice.engine.duplex.DuplexVoiceEngine`,
our core owning the turns as far as the API lets it (docs/adr/0022-gpt-live-engine.md)."""

from openab_voice.engine.live.delegation import LIVE_TOOLS, Delegations, delegation_config
from openab_voice.engine.live.engine import LiveEngine, live_engine
from openab_voice.engine.live.session import LiveSettings, live_capabilities, session_start

__all__ = [
    "LIVE_TOOLS",
    "Delegations",
    "LiveEngine",
    "LiveSettings",
    "delegation_config",
    "live_capabilities",
    "live_engine",
    "session_start",
]
