"""One definition per knob: a component's dataclass takes a setting's default from its declaration.

A setting's declaration (its field in :mod:`~openab_voice.settings.voice`, ``store`` or ``actions``)
holds its default beside its bounds, description and environment name, and is what the README
documents. The settings sit below every component (ADR 0009), so the default flows down-to-up: the
component's dataclass reads it here (``jitter_depth: int = default_of(VoiceSettings, "jitter_depth")``)
instead of writing the number again. ADR 0017; ``tests/unit/test_setting_defaults.py`` holds the pairs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined


def default_of(group: type[BaseModel], field: str) -> Any:
    """The declared default of ``group``'s ``field`` (a plain value: no factory, not required).

    Raises:
        KeyError: ``group`` declares no ``field``.
        TypeError: the field has no plain default.
    """
    info = group.model_fields[field]
    if info.default_factory is not None or info.default is PydanticUndefined:
        raise TypeError(f"{group.__name__}.{field} has no plain default")
    return info.default
