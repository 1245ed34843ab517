"""The live engine: OpenAI GPT-Live behind :class:`~openab_voice.engine.duplex.DuplexVoiceEngine`
(docs/adr/0022-gpt-live-engine.md). So far its delegation path (:mod:`.delegation`); the engine
itself follows."""

from openab_voice.engine.live.delegation import LIVE_TOOLS, Delegations, delegation_config

__all__ = ["LIVE_TOOLS", "Delegations", "delegation_config"]
