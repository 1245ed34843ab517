"""The ToolRouter: the only tool path, with risk levels, per-turn budgets, truncation and audit.

:class:`ToolRouter` is the engine's tool path (``specs()`` and ``call()``); the
:class:`~openab_voice.tools.registry.ToolRegistry` underneath only checks and runs what the router
lets through. Around every call it adds a closed door (off, or no audit log: nothing runs), strict
validation (``additionalProperties: false``), a :class:`ToolRisk` per tool, per-turn budgets
(``max_calls_per_turn``, ``max_proposals_per_turn``, ``max_runtime_s_per_turn``), truncation
(``max_output_chars``) and one :class:`ToolCallAudit` per call in a :class:`ToolAuditLog`.
Voice tools stay semantic; shell and browser only through confirmed actions. Each rule in detail:
docs/adr/0011-tool-router-boundary.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final, Protocol

from openab_voice.clock import Clock
from openab_voice.errors import ErrorCode
from openab_voice.providers.chat import ToolCall, ToolSpec
from openab_voice.settings.actions import ActionSettings
from openab_voice.settings.defaults import default_of
from openab_voice.tools.output import summarize, truncate
from openab_voice.tools.registry import ToolContext, ToolHandler, ToolRegistry, ToolResult

__all__ = [
    "DEFAULT_RISKS",
    "Confirmation",
    "MemoryAuditLog",
    "RouterSettings",
    "ToolAuditLog",
    "ToolCallAudit",
    "ToolRisk",
    "ToolRouter",
]

log = logging.getLogger(__name__)


_DISABLED_REASON: Final = "tools are turned off on this bot; nothing was run: answer without them"
_UNAUDITED_REASON: Final = (
    "tool calls cannot be audited here (no job store database), so nothing was run: answer without them"
)


class ToolRisk(StrEnum):
    """What a tool can do."""

    READ = "read"
    """Reads state; changes nothing (the clock, a task's status, a memory search)."""
    WRITE = "write"
    """Changes the bot's own state (saves a memory, cancels a task the speaker asked for)."""
    PROPOSE = "propose"
    """Proposes work that runs only after the operator confirms it in the text channel."""


class Confirmation(StrEnum):
    """Whether a call's effect waits for the operator, as the audit records it."""

    NOT_REQUIRED = "not_required"
    AWAITING_OPERATOR = "awaiting_operator"
    NOT_PROPOSED = "not_proposed"


DEFAULT_RISKS: Final[Mapping[str, ToolRisk]] = {
    "clock_now": ToolRisk.READ,
    "get_agent_task": ToolRisk.READ,
    "cancel_agent_task": ToolRisk.WRITE,
    "start_agent_task": ToolRisk.PROPOSE,
    "memory_search": ToolRisk.READ,
    "memory_save": ToolRisk.WRITE,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterSettings:
    """Budgets and bounds (``OPENAB_TOOL_*``).

    Attributes:
        max_calls_per_turn: tool calls one dialogue turn may make.
        max_proposals_per_turn: calls of ``propose`` tools one turn may make.
        max_runtime_s_per_turn: tool time one turn may spend, all calls together.
        max_output_chars: longest tool result (JSON characters) the model gets.
        turns_remembered: turns whose budgets are kept (older ones are forgotten).
    """

    max_calls_per_turn: int = default_of(ActionSettings, "tool_max_calls_per_turn")
    max_proposals_per_turn: int = default_of(ActionSettings, "tool_max_proposals_per_turn")
    max_runtime_s_per_turn: float = default_of(ActionSettings, "tool_max_runtime_s_per_turn")
    max_output_chars: int = default_of(ActionSettings, "tool_max_output_chars")
    turns_remembered: int = 64

    def __post_init__(self) -> None:
        if min(self.max_calls_per_turn, self.max_proposals_per_turn, self.turns_remembered) < 0:
            raise ValueError("budgets must not be negative")
        if self.max_runtime_s_per_turn <= 0 or self.max_output_chars < 64:
            raise ValueError("max_runtime_s_per_turn must be positive and max_output_chars at least 64")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallAudit:
    """One audited tool call.

    Attributes:
        at: wall time the call started (injected clock).
        tool: the name the model used (clipped; it may be no registered tool).
        risk: the tool's risk level; None for an unknown tool.
        speaker_id: the Discord user whose turn made the call.
        confirmation: whether the call's effect waits for the operator.
        outcome: ``ok`` or the ``TOOL_*`` error code.
        duration_ms: time in the handler (0 when refused before it ran).
        truncated: the result was cut to fit ``max_output_chars``.
        summary: sanitized arguments and result or reason (:func:`~openab_voice.tools.output.summarize`).
    """

    at: float
    session_id: str | None
    turn_id: str | None
    call_id: str
    tool: str
    risk: ToolRisk | None
    speaker_id: str | None
    confirmation: Confirmation
    outcome: str
    duration_ms: float
    truncated: bool = False
    summary: dict[str, Any] = field(default_factory=dict)


class ToolAuditLog(Protocol):
    """Where audit rows go (``openab_voice.store.tool_calls.ToolCallLog``). Synchronous: the router
    calls it in a worker thread."""

    def record(self, entry: ToolCallAudit) -> None: ...


class MemoryAuditLog:
    """An audit log kept in memory, the newest ``limit`` rows: for a self-test on its fakes, where
    there is no job store and the rows are only looked at before the process ends."""

    def __init__(self, limit: int = 256) -> None:
        self.entries: deque[ToolCallAudit] = deque(maxlen=limit)

    def record(self, entry: ToolCallAudit) -> None:
        self.entries.append(entry)


@dataclass(slots=True)
class _Spent:
    calls: int = 0
    proposals: int = 0
    runtime_s: float = 0.0


class ToolRouter:
    """The tool path with risk levels, per-turn budgets, output truncation and audit.

    Args:
        registry: the tools; every one must have a risk level in ``risks`` and refuse unknown fields.
        clock: durations and the runtime budget are measured on it.
        audit: where every call is recorded. None: there is nowhere to record, so nothing runs (every
            call is refused with ``TOOL_AUDIT_UNAVAILABLE``): the router fails closed, never unaudited.
        risks: risk level by tool name.
        enabled: False (``OPENAB_TOOL_ROUTER_ENABLED=false``): nothing runs; every call is refused with
            ``TOOL_ROUTER_DISABLED`` (and recorded, when there is an audit log).

    Raises:
        ValueError: a registered tool has no risk level or its schema accepts unknown fields.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        clock: Clock,
        audit: ToolAuditLog | None,
        settings: RouterSettings | None = None,
        risks: Mapping[str, ToolRisk] = DEFAULT_RISKS,
        enabled: bool = True,
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._settings = settings or RouterSettings()
        self._audit = audit
        self._risks = dict(risks)
        self._turns: OrderedDict[str, _Spent] = OrderedDict()
        self.audit_failures = 0
        self._refusal: tuple[str, str] | None = None
        if not enabled:
            self._refusal = (ErrorCode.TOOL_ROUTER_DISABLED, _DISABLED_REASON)
        elif audit is None:
            self._refusal = (ErrorCode.TOOL_AUDIT_UNAVAILABLE, _UNAUDITED_REASON)
            log.warning("tool calls are refused: there is no audit log to record them in")
        for spec in registry.specs():
            self._check(spec)

    @property
    def settings(self) -> RouterSettings:
        return self._settings

    @property
    def refusal(self) -> str | None:
        """Why no call runs (``TOOL_ROUTER_DISABLED``, ``TOOL_AUDIT_UNAVAILABLE``); None: calls run."""
        return self._refusal[0] if self._refusal is not None else None

    def register(
        self, spec: ToolSpec, handler: ToolHandler, *, risk: ToolRisk, timeout_s: float | None = None
    ) -> None:
        """Add a tool with its risk level (to the registry underneath)."""
        self._risks[spec.name] = risk
        self._check(spec)
        self._registry.register(spec, handler, timeout_s=timeout_s)

    def risk(self, name: str) -> ToolRisk | None:
        """A registered tool's risk level (None: no such tool)."""
        return self._risks.get(name) if name in self._registry else None

    def specs(self) -> list[ToolSpec]:
        """The tools to offer to a model (the registry's); none while the router runs nothing."""
        return [] if self._refusal is not None else self._registry.specs()

    async def call(self, call: ToolCall, context: ToolContext | None = None) -> ToolResult:
        """Run one call within its turn's budgets; every failure is a result, never an exception.

        Raises:
            asyncio.CancelledError: only when the caller is cancelled.
        """
        context = context or ToolContext()
        risk = self.risk(call.name)
        started_wall, started = self._clock.wall(), self._clock.monotonic()
        spent = self._spent(context.turn_id)
        duration_ms = 0.0
        truncated = False
        if self._refusal is not None:
            # Refused: no budget is spent and nothing reaches the registry, not even validation.
            code, reason = self._refusal
            result = ToolResult(call_id=call.id, name=call.name, ok=False, error_code=code, reason=reason)
        elif (refusal := self._over_budget(spent, risk)) is not None:
            result = ToolResult(
                call_id=call.id,
                name=call.name,
                ok=False,
                error_code=ErrorCode.TOOL_BUDGET_EXCEEDED,
                reason=refusal,
            )
        else:
            if risk is not None:
                # Reserved before the await: a second call of the same turn sees this one counted.
                spent.calls += 1
                spent.proposals += risk is ToolRisk.PROPOSE
            remaining = self._settings.max_runtime_s_per_turn - spent.runtime_s
            try:
                result = await self._registry.call(call, context, timeout_s=remaining)
            finally:
                elapsed = max(0.0, self._clock.monotonic() - started)
                spent.runtime_s += elapsed
                duration_ms = elapsed * 1000.0
            if result.ok:
                content, truncated = truncate(result.content, self._settings.max_output_chars)
                result = replace(result, content=content)
        entry = ToolCallAudit(
            at=started_wall,
            session_id=context.session_id,
            turn_id=context.turn_id,
            call_id=call.id[:64],
            tool=call.name[:64],
            risk=risk,
            speaker_id=context.speaker_id,
            confirmation=_confirmation(risk, result),
            outcome="ok" if result.ok else (result.error_code or "error"),
            duration_ms=round(duration_ms, 3),
            truncated=truncated,
            summary=_summary(call, result),
        )
        await self._record(entry)
        return result

    # --- internals ------------------------------------------------------------------------------

    def _check(self, spec: ToolSpec) -> None:
        if spec.name not in self._risks:
            raise ValueError(f"tool {spec.name!r} has no risk level")
        if spec.parameters.get("additionalProperties") is not False:
            raise ValueError(f"tool {spec.name!r} must refuse unknown fields (additionalProperties: false)")

    def _spent(self, turn_id: str | None) -> _Spent:
        """The turn's budget so far; a call outside any turn gets a budget of its own."""
        if turn_id is None:
            return _Spent()
        spent = self._turns.get(turn_id)
        if spent is None:
            spent = self._turns[turn_id] = _Spent()
            while len(self._turns) > self._settings.turns_remembered:
                self._turns.popitem(last=False)
        else:
            self._turns.move_to_end(turn_id)
        return spent

    def _over_budget(self, spent: _Spent, risk: ToolRisk | None) -> str | None:
        s = self._settings
        if risk is None:
            return None  # an unknown tool is the registry's error, and costs nothing
        if spent.calls >= s.max_calls_per_turn:
            return f"this turn already made {spent.calls} tool calls (the limit); answer with what you have"
        if risk is ToolRisk.PROPOSE and spent.proposals >= s.max_proposals_per_turn:
            return f"this turn already proposed {spent.proposals} task(s) (the limit); ask in a later turn"
        if spent.runtime_s >= s.max_runtime_s_per_turn:
            return (
                f"this turn spent its {s.max_runtime_s_per_turn:g} s of tool time; answer with what you have"
            )
        return None

    async def _record(self, entry: ToolCallAudit) -> None:
        if self._audit is None:
            return
        try:
            await asyncio.to_thread(self._audit.record, entry)
        except Exception:  # the model's answer does not depend on the audit write
            self.audit_failures += 1
            log.warning("tool call %s (%s): audit row not written", entry.call_id, entry.tool, exc_info=True)


def _confirmation(risk: ToolRisk | None, result: ToolResult) -> Confirmation:
    if risk is not ToolRisk.PROPOSE:
        return Confirmation.NOT_REQUIRED
    # A proposal tool's own refusal ({"ok": false}) proposed nothing either.
    if result.ok and result.content.get("ok", True) is not False:
        return Confirmation.AWAITING_OPERATOR
    return Confirmation.NOT_PROPOSED


def _summary(call: ToolCall, result: ToolResult) -> dict[str, Any]:
    summary: dict[str, Any] = {"arguments": summarize(_arguments(call.arguments))}
    if result.ok:
        summary["result"] = summarize(result.content)
    else:
        summary["reason"] = summarize(result.reason or "")
    return summary


def _arguments(text: str) -> Any:
    """The arguments as the model sent them, parsed when they parse (for the summary only)."""
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text
