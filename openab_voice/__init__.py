"""openab-voice: a Discord voice agent that hears every speaker separately.

Data flow (see DESIGN.md): ``discord/`` (receive, playback) -> ``audio/`` (frames, rings,
front end) -> ``engine/`` (dialogue) -> ``actions/`` -> ``acp/``; ``bus/`` carries typed
events for reporters, reports and tests.
"""

__version__ = "0.1.0"
