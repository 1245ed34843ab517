"""Settings: ``OPENAB_*`` environment variables, secrets from the environment or ``*_FILE`` paths.

Validated once at start-up; any problem raises :class:`~openab_voice.errors.ConfigError` naming the
offending environment variable. Unknown ``OPENAB_*`` variables are rejected too, so a typo never
silently falls back to a default. Secret values are ``SecretStr`` and never printed:
:func:`public_view` is what ``check-config`` shows. The fields are declared in groups in
:mod:`openab_voice.settings`; this module composes them, checks what spans groups, and loads them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from openab_voice.errors import ConfigError, ErrorCode
from openab_voice.settings.actions import ActionSettings
from openab_voice.settings.names import ENV_PREFIX, SECRET_ENV, env_name
from openab_voice.settings.realtime_models import DEFAULT_REALTIME_MODEL, RETIRED_REALTIME_MODELS
from openab_voice.settings.store import StoreSettings
from openab_voice.settings.voice import VoiceSettings
from openab_voice.shards import pod_count


# pydantic orders the fields from the last base to the first: voice, store, actions (the order of
# check-config's output, of the README's table, and of which error a bad environment reports first).
class Settings(ActionSettings, StoreSettings, VoiceSettings, BaseSettings):
    """Every setting of openab-voice. Environment names are ``OPENAB_<FIELD>`` unless noted."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    @model_validator(mode="after")
    def _dialogue_needs_playback(self) -> Settings:
        if self.dialogue_enabled and not self.playback_enabled:
            raise ValueError("dialogue_enabled needs playback_enabled")
        if self.dialogue_enabled and not self.transcription_enabled:
            raise ValueError("dialogue_enabled needs transcription_enabled")
        if self.actions_enabled and self.operator_user_id is None:
            raise ValueError("operator_user_id is required when actions_enabled")
        if self.actions_enabled and self.executor == "local" and not self.acp_agent_command.strip():
            # Remote executors run the agent; a bot that only queues and delivers needs no command.
            raise ValueError("acp_agent_command is required when actions_enabled")
        if self.heartbeat_s * 2 > self.lease_s:
            raise ValueError("heartbeat_s must be at most half of lease_s")
        self._check_pods()
        self._check_shards()
        self._check_language()
        return self

    def _check_language(self) -> None:
        """Every stage that hears or speaks can do the language (fail at start-up, not in a call)."""
        if self.language == "en":
            return
        if self.transcription_enabled and self.stt_model == "tiny.en":
            raise ValueError(
                f"stt_model tiny.en transcribes English only: language {self.language} needs stt_model base"
            )
        if self.dialogue_enabled and self.engine == "cascade" and self.tts_provider == "piper":
            # The offline voice shipped here is joe (en_US); a Chinese answer would be spelled out in it.
            raise ValueError(
                f"tts_provider piper has only an English voice here: language {self.language} needs "
                "tts_provider openai (or engine realtime or live, whose model speaks)"
            )

    def _check_pods(self) -> None:
        if self.acp_sandbox != "pod":
            return
        if self.action_pod_image is None:
            raise ValueError("action_pod_image is required when acp_sandbox is pod")
        if self.workspace_repo is not None:
            raise ValueError(
                "workspace_repo: a worktree of a local repository cannot be an action pod's workspace"
            )
        if self.acp_env:
            # The dispatcher never holds the agent's keys: the action pod gets them from its own secret.
            raise ValueError(
                "acp_env: with acp_sandbox pod the agent's credentials come from action_pod_agent_secret"
            )

    def _check_shards(self) -> None:
        if self.shard_count is None:
            if self.shards_per_pod != 1:
                raise ValueError("shards_per_pod needs shard_count")
            if self.shard_ordinal is not None:
                raise ValueError("shard_ordinal needs shard_count")
            return
        if self.shards_per_pod > self.shard_count:
            raise ValueError(f"shards_per_pod must be at most shard_count ({self.shard_count})")
        if self.shard_ordinal is not None and self.shard_ordinal * self.shards_per_pod >= self.shard_count:
            raise ValueError(
                f"shard_ordinal {self.shard_ordinal} is past the last pod ({pod_count(self) - 1})"
            )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings() maps an explicit environment onto init values, so tests and the demo
        # never depend on (or mutate) the process environment.
        return (init_settings,)


def _read_secret(environ: Mapping[str, str], var: str) -> str | None:
    """The value of ``var``, or the contents of the file named by ``<var>_FILE``."""
    path = environ.get(f"{var}_FILE")
    if not path:
        return environ.get(var) or None
    if environ.get(var):
        raise ConfigError(f"set either {var} or {var}_FILE, not both", setting=f"{var}_FILE")
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {var}_FILE: {exc.strerror}",
            setting=f"{var}_FILE",
            code=ErrorCode.CONFIG_SECRET_UNREADABLE,
        ) from None
    if not value:
        raise ConfigError(f"{var}_FILE is empty", setting=f"{var}_FILE")
    return value


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Read and validate settings from ``env`` (default: ``os.environ``).

    Args:
        env: environment to read; tests pass their own mapping.
        overrides: values that take precedence (the demo's embedded defaults).

    Raises:
        ConfigError: naming the environment variable at fault.
    """
    environ = os.environ if env is None else env
    known = {env_name(f) for f in Settings.model_fields} | {f"{v}_FILE" for v in SECRET_ENV.values()}
    for key in environ:
        if key.startswith(ENV_PREFIX) and key not in known:
            raise ConfigError(f"unknown setting {key}", setting=key)
    values: dict[str, Any] = {}
    for field in Settings.model_fields:
        if field in SECRET_ENV:
            secret = _read_secret(environ, SECRET_ENV[field])
            if secret is not None:
                values[field] = secret
        elif (raw := environ.get(env_name(field))) is not None:
            if raw == "" and Settings.model_fields[field].default is None:
                # Unset in all but name: Kubernetes gives a fieldRef to a missing label (the StatefulSet
                # pod-index before 1.28) as an empty variable, and the fallback must still run.
                continue
            values[field] = raw
    values.update(overrides)
    try:
        return Settings(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else _field_in(str(err["msg"]))
        name = env_name(field) if field in Settings.model_fields else field
        raise ConfigError(f"{name}: {err['msg']}", setting=name) from None


def _field_in(message: str) -> str:
    """The setting a model-level validation message names first (e.g. ``dialogue_enabled``)."""
    found = [(message.find(field), field) for field in Settings.model_fields if field in message]
    return min(found)[1] if found else "?"


def public_view(settings: Settings) -> dict[str, Any]:
    """Non-secret settings keyed by environment variable (JSON-friendly); secrets only as ``set``/``unset``."""
    out: dict[str, Any] = {}
    for field in Settings.model_fields:
        value = getattr(settings, field)
        if field in SECRET_ENV:
            out[env_name(field)] = "set" if value is not None else "unset"
        elif isinstance(value, Path):
            out[env_name(field)] = str(value)
        elif isinstance(value, tuple):
            out[env_name(field)] = list(value)
        else:
            out[env_name(field)] = value
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigWarning:
    """A valid setting that is probably not what was meant (``check-config`` shows it; start-up goes on).

    Attributes:
        code: stable, like an error's (``CONFIG_*``).
        setting: the environment variable at fault.
        message: what is wrong and what to do.
    """

    code: str
    setting: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """The same shape as :meth:`~openab_voice.errors.OpenabError.to_dict`, less ``retryable``."""
        return {"code": self.code, "message": self.message, "setting": self.setting}

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


def config_warnings(settings: Settings) -> list[ConfigWarning]:
    """What ``check-config`` warns about: today a retired or legacy realtime model name."""
    found: list[ConfigWarning] = []
    model = settings.openai_realtime_model
    if model in RETIRED_REALTIME_MODELS:
        found.append(
            ConfigWarning(
                code=ErrorCode.CONFIG_REALTIME_MODEL_RETIRED,
                setting=env_name("openai_realtime_model"),
                message=(
                    f"{model} is a retired or legacy realtime model (OpenAI deprecations); "
                    f"use {DEFAULT_REALTIME_MODEL}, the default"
                ),
            )
        )
    return found


def describe() -> list[tuple[str, str, str]]:
    """(environment variable, default, description) rows for the README's configuration table."""
    rows = []
    for field, info in Settings.model_fields.items():
        if info.default_factory is not None:
            default = "$XDG_DATA_HOME/openab-voice" if field == "data_dir" else "(computed)"
        else:
            default = "" if info.default is None else str(info.default)
        rows.append((env_name(field), default, info.description or ""))
    return rows
