"""The OpenAI Realtime model names: the default of ``OPENAI_REALTIME_MODEL`` and the retired ones.

Read from the installed openai SDK (3.63): the ``model`` Literal of
``openai/types/realtime/realtime_session_create_request.py`` and its "Deprecated values" note
(shutdown 2027-01-20, https://developers.openai.com/api/docs/deprecations). The default is the newest
full-size GA name listed there (the ``-mini`` names trade quality for price). Retired or legacy: what
that note deprecates, the ``gpt-4o-*-realtime-preview*`` previews the GA models replaced, and the
older dated snapshots of a deprecated family. tests/unit/test_realtime_models.py reads the Literal
at test time, so an SDK that drops the default fails there.
"""

from __future__ import annotations

DEFAULT_REALTIME_MODEL = "gpt-realtime-2.1"
RETIRED_REALTIME_MODELS: frozenset[str] = frozenset(
    {
        "gpt-realtime",
        "gpt-realtime-2025-08-28",
        "gpt-realtime-mini",
        "gpt-realtime-mini-2025-10-06",
        "gpt-realtime-mini-2025-12-15",
        "gpt-audio-mini",
        "gpt-audio-mini-2025-10-06",
        "gpt-audio-mini-2025-12-15",
        "gpt-4o-realtime-preview",
        "gpt-4o-realtime-preview-2024-10-01",
        "gpt-4o-realtime-preview-2024-12-17",
        "gpt-4o-realtime-preview-2025-06-03",
        "gpt-4o-mini-realtime-preview",
        "gpt-4o-mini-realtime-preview-2024-12-17",
    }
)
