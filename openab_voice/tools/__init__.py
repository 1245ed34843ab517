"""The one path from a model's tool call to code: :class:`ToolRegistry` checks every call against the
tool's declared schema before its handler runs, bounds it with a timeout on the injected clock, and
turns every failure (unknown tool, malformed or invalid arguments, handler error, timeout) into a
structured :class:`ToolResult`. Tool calls are untrusted model output: they are validated, never
obeyed."""

from openab_voice.tools.registry import (
    CLOCK_NOW,
    ToolContext,
    ToolHandler,
    ToolInputError,
    ToolRegistry,
    ToolResult,
    default_tools,
)

__all__ = [
    "CLOCK_NOW",
    "ToolContext",
    "ToolHandler",
    "ToolInputError",
    "ToolRegistry",
    "ToolResult",
    "default_tools",
]
