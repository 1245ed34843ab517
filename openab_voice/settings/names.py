"""The environment variable of each setting: ``OPENAB_<FIELD>`` unless it has a conventional name."""

from __future__ import annotations

ENV_PREFIX = "OPENAB_"

# Secrets: field name -> environment variable; ``<VAR>_FILE`` names a file holding the value.
SECRET_ENV: dict[str, str] = {
    "discord_token": "DISCORD_TOKEN",
    "openai_api_key": "OPENAI_API_KEY",
    # A PostgreSQL URL carries its password: treated as a secret (OPENAB_DATABASE_URL or ..._FILE).
    "database_url": "OPENAB_DATABASE_URL",
}
# Non-secret settings with a conventional, unprefixed name.
PLAIN_ENV: dict[str, str] = {
    "openai_base_url": "OPENAI_BASE_URL",
    "openai_realtime_model": "OPENAI_REALTIME_MODEL",
    "openai_realtime_voice": "OPENAI_REALTIME_VOICE",
    "openai_live_model": "OPENAI_LIVE_MODEL",
    "openai_live_voice": "OPENAI_LIVE_VOICE",
    "openai_live_backend_model": "OPENAI_LIVE_BACKEND_MODEL",
}


def env_name(field: str) -> str:
    """The environment variable that sets ``field``."""
    return SECRET_ENV.get(field) or PLAIN_ENV.get(field) or ENV_PREFIX + field.upper()
