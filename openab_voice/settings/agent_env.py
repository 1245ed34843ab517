"""The line an ACP agent's environment may not cross: never our secrets or ``OPENAB_*`` settings.

``OPENAB_ACP_ENV_ALLOWLIST`` names variables passed as they are; ``OPENAB_ACP_ENV`` gives the agent
its own credentials, each ``NAME=FROM_VAR`` or ``NAME=@/abs/path``. Both are checked here when the
settings load; :mod:`openab_voice.acp.spawn` applies them at each spawn (and refuses our names again).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from openab_voice.settings.names import ENV_PREFIX, SECRET_ENV

# Set by us in every agent's environment (its private, throwaway directories).
_AGENT_OWN_NAMES = frozenset({"HOME", "TMPDIR"})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_allowlist(names: Iterable[str]) -> None:
    """Refuse an ``OPENAB_ACP_ENV_ALLOWLIST`` that names one of our secrets (or its ``_FILE``) or settings.

    Raises:
        ValueError: naming every such variable.
    """
    ours = set(SECRET_ENV.values()) | {f"{var}_FILE" for var in SECRET_ENV.values()}
    leaked = sorted(name for name in names if name in ours or name.startswith(ENV_PREFIX))
    if leaked:
        raise ValueError(f"must not pass openab-voice's own settings or secrets: {', '.join(leaked)}")


def parse_agent_env_entry(entry: str) -> tuple[str, str]:
    """``(NAME, SOURCE)`` of one ``OPENAB_ACP_ENV`` entry: ``NAME=FROM_VAR`` or ``NAME=@/abs/path``.

    The agent-side ``NAME`` may be anything but ``HOME``/``TMPDIR`` and ``OPENAB_*`` (so an agent can get
    its own ``OPENAI_API_KEY``); the source may never be one of our secrets or settings.

    Raises:
        ValueError: the entry is malformed or would pass one of our own secrets.
    """
    name, sep, source = entry.partition("=")
    name, source = name.strip(), source.strip()
    if not sep or not _ENV_NAME.fullmatch(name) or not source:
        raise ValueError(f"{entry!r}: expected NAME=FROM_VAR or NAME=@/path/to/file")
    if name in _AGENT_OWN_NAMES or name.startswith(ENV_PREFIX):
        raise ValueError(f"{entry!r}: {name} is not the agent's to set")
    if source.startswith("@"):
        if not os.path.isabs(source[1:]):
            raise ValueError(f"{entry!r}: the file must be an absolute path")
        return name, source
    ours = set(SECRET_ENV.values())
    if not _ENV_NAME.fullmatch(source) or source in ours or source.removesuffix("_FILE") in ours:
        raise ValueError(f"{entry!r}: {source} is not a variable the agent may be given")
    if source.startswith(ENV_PREFIX):
        raise ValueError(f"{entry!r}: {source} is one of openab-voice's own settings")
    return name, source
