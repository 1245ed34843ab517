"""What openab-voice can be told: the settings' environment names and their declarations.

``names`` maps a setting to its environment variable (``OPENAB_*``, the secrets, the conventional
``OPENAI_*``); ``voice``, ``store`` and ``actions`` declare the fields (type, bounds, default,
description) in groups; ``agent_env`` is the line an ACP agent's environment may not cross;
``realtime_models`` the realtime model names; ``defaults`` how a component takes a setting's default
from its declaration (one definition per knob). :mod:`openab_voice.config` composes the groups into
``Settings``, checks what spans them and loads it from the environment (pydantic-settings lives there
only).
"""
