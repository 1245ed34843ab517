"""The one path from a model's tool call to code. :class:`ToolRegistry` checks every call against the
tool's declared schema before its handler runs, bounds it with a timeout on the injected clock, and
turns every failure (unknown tool, malformed or invalid arguments, handler error, timeout) into a
structured :class:`ToolResult`. :class:`ToolRouter` stands in front of it (``OPENAB_TOOL_ROUTER_ENABLED``):
risk levels, per-turn call and runtime budgets, output truncation and an audit row per call. Tool
calls are untrusted model output: they are validated, never obeyed."""

from openab_voice.tools.registry import (
    CLOCK_NOW,
    ToolContext,
    ToolHandler,
    ToolInputError,
    ToolRegistry,
    ToolResult,
    default_tools,
)
from openab_voice.tools.router import (
    DEFAULT_RISKS,
    TOOL_BUDGET_EXCEEDED,
    Confirmation,
    RouterSettings,
    ToolAuditLog,
    ToolCallAudit,
    ToolRisk,
    ToolRouter,
)

__all__ = [
    "CLOCK_NOW",
    "DEFAULT_RISKS",
    "TOOL_BUDGET_EXCEEDED",
    "Confirmation",
    "RouterSettings",
    "ToolAuditLog",
    "ToolCallAudit",
    "ToolContext",
    "ToolHandler",
    "ToolInputError",
    "ToolRegistry",
    "ToolResult",
    "ToolRisk",
    "ToolRouter",
    "default_tools",
]
