"""Bounding what goes back to the model: tool output truncated to a size, and audit summaries.

A tool's result becomes a tool message in the model's context; an unbounded one (a long status, a
list of records) would crowd out the conversation or blow the context window. :func:`truncate`
shortens the result until its JSON fits, keeping it a JSON object the model can read, and marks it
``"truncated": true`` so the model knows it saw part of it. :func:`summarize` is the sanitized,
short form of arguments and results the audit keeps: secret-named keys and secret-looking values
redacted, strings clipped.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["REDACTED", "summarize", "truncate"]

REDACTED: Final = "[redacted]"
_MIN_STRING = 16
_MIN_ITEMS = 1
_SUMMARY_TEXT = 80
_SECRET_KEY = re.compile(r"(token|secret|password|passwd|api[_-]?key|authorization|credential|private)", re.I)
# Values that look like credentials whatever key they sit under: provider keys, bearer tokens, JWTs,
# PEM blocks, long opaque hex/base64 runs, and card-like digit runs.
_SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_-]{12,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|bearer\s+\S{12,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----|\b[A-Fa-f0-9]{32,}\b|\b[A-Za-z0-9+/]{40,}={0,2}"
    r"|\b(?:\d[ -]?){13,19}\b)",
    re.I,
)


def size(value: dict[str, Any]) -> int:
    """Characters of the JSON text the model would get."""
    return len(json.dumps(value, ensure_ascii=False))


def truncate(content: dict[str, Any], max_chars: int) -> tuple[dict[str, Any], bool]:
    """``content`` shortened until its JSON text is at most ``max_chars``; (result, whether cut).

    Strings are clipped and lists shortened, the cap halving until the object fits; a result that
    still does not fit (many keys) becomes ``{"truncated": true, "preview": <its JSON, clipped>}``.
    A cut result carries ``"truncated": true`` at its top level.
    """
    if size(content) <= max_chars:
        return content, False
    cap = max_chars
    while cap >= _MIN_STRING:
        cut = _clip(content, cap)
        cut["truncated"] = True
        if size(cut) <= max_chars:
            return cut, True
        cap //= 2
    text = json.dumps(content, ensure_ascii=False)
    room = max(0, max_chars - size({"truncated": True, "preview": ""}))
    preview = {"truncated": True, "preview": text[:room]}
    while (over := size(preview) - max_chars) > 0:  # quotes in the preview are escaped once more
        room = max(0, room - over)
        preview["preview"] = text[:room]
    return preview, True


def _clip(value: Any, cap: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= cap else value[: cap - 1] + "…"
    if isinstance(value, dict):
        return {key: _clip(item, cap) for key, item in value.items()}
    if isinstance(value, list):
        items = max(_MIN_ITEMS, cap // _MIN_STRING)
        return [_clip(item, cap) for item in value[:items]]
    return value


def summarize(value: Any, *, depth: int = 0) -> Any:
    """A short, sanitized copy of ``value`` for the audit (JSON-serializable, no secrets)."""
    if depth > 3:
        return "…"
    if isinstance(value, dict):
        return {
            str(key)[:64]: (REDACTED if _SECRET_KEY.search(str(key)) else summarize(item, depth=depth + 1))
            for key, item in list(value.items())[:20]
        }
    if isinstance(value, (list, tuple)):
        return [summarize(item, depth=depth + 1) for item in value[:10]]
    if isinstance(value, str):
        text = _SECRET_VALUE.sub(REDACTED, value)
        return text if len(text) <= _SUMMARY_TEXT else text[: _SUMMARY_TEXT - 1] + "…"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return type(value).__name__
