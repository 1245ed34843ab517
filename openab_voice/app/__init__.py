"""The composition root: the one place that builds and wires components.

:func:`build_app` builds the long-lived parts from settings (providers, the action plane's store and
workspaces: :mod:`.providers`, :mod:`.actions`); :meth:`Application.create_bot` builds the Discord
client around them with its voice sessions, ``/voice`` commands and action plane (:mod:`.bot`); the
:class:`~.sessions.SessionFactory` builds each voice session's parts when ``/voice join`` asks.
``discord/`` only receives ready-built collaborators. ``openab-voice run``, the demo, the benches and
the tests' harness all build through here.
"""

from openab_voice.app.actions import ActionParts, build_action_parts
from openab_voice.app.bot import Application, EmulatorLink, bot_token, build_app, run_bot
from openab_voice.app.providers import build_providers, check_providers, frontend_settings, probe_engine
from openab_voice.app.sessions import SessionFactory, SessionOptions, session_options

__all__ = [
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
]
