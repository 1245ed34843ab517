"""openab-voice: a Discord voice agent that hears every speaker separately.

Data flow (see DESIGN.md): ``discord/`` (receive, playback) -> ``audio/`` (frames, rings,
front end) -> ``engine/`` (dialogue) -> ``actions/`` -> ``acp/``; ``bus/`` carries typed
events for reporters, reports and tests.
"""

import os as _os

# CTranslate2 (speech-to-text) and llama.cpp (the offline LLM) run their thread pools on OpenMP, whose
# idle threads spin-wait by default. On a shared machine a spinning pool holds a core that the audio
# plane, the other pool or Piper needs (ADR 0006, decision 6). libgomp reads this once, when it is
# loaded: set here, before any provider imports it; a value the user set is kept.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
