"""Provider seams, one module per capability: :mod:`.apm` (echo cancellation, noise suppression, gain),
:mod:`.vad`, :mod:`.tts`, :mod:`.chat` and :mod:`.realtime` (speech-to-text's is :mod:`openab_voice.stt.base`).
Each holds the capability's ``typing.Protocol``, its frozen capabilities and config dataclasses and its
table of implementations, one module each (``apm_livekit``, ``tts_piper``, ``chat_openai`` ...), created
by name through the one lazy registry (:mod:`.registry`). A provider whose optional dependency is
missing raises :class:`~openab_voice.errors.ProviderUnavailable` naming the extra when it is created,
never an ``ImportError`` at import time."""
