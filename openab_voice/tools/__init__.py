"""The one path from a model's tool call to code: :class:`ToolRouter`, always. It holds the risk levels,
the per-turn call and runtime budgets, output truncation and an audit row per call; off
(``OPENAB_TOOL_ROUTER_ENABLED=false``) or without an audit log it runs nothing and says why
(``TOOL_ROUTER_DISABLED``, ``TOOL_AUDIT_UNAVAILABLE``). Underneath, :class:`ToolRegistry` checks every
call the router lets through against the tool's declared schema, bounds it with a timeout on the
injected clock, and turns every failure (unknown tool, malformed or invalid arguments, handler error,
timeout) into a structured :class:`ToolResult`. Tool calls are untrusted model output: they are
validated, never obeyed."""

from openab_voice.tools.registry import (
    CLOCK_NOW,
    ToolContext,
    ToolHandler,
    ToolRegistry,
    ToolResult,
    default_tools,
)
from openab_voice.tools.router import (
    DEFAULT_RISKS,
    Confirmation,
    MemoryAuditLog,
    RouterSettings,
    ToolAuditLog,
    ToolCallAudit,
    ToolRisk,
    ToolRouter,
)

__all__ = [
    "CLOCK_NOW",
    "DEFAULT_RISKS",
    "Confirmation",
    "MemoryAuditLog",
    "RouterSettings",
    "ToolAuditLog",
    "ToolCallAudit",
    "ToolContext",
    "ToolHandler",
    "ToolRegistry",
    "ToolResult",
    "ToolRisk",
    "ToolRouter",
    "default_tools",
]
