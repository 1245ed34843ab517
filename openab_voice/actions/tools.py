"""The semantic tools, the only action tools the voice model gets.

``start_agent_task(goal, effect_hint)``, ``get_agent_task(action_id)``, ``cancel_agent_task(action_id)``.
There is no approve tool and no shell tool: the model can propose; the operator confirms in text.
Trusted context (guild, voice-session generation, speaker from SSRC attribution, control channel)
comes from the voice session and the tool call's :class:`~openab_voice.tools.ToolContext`, never
from the model's arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.requests import ActionRequest, Outcome
from openab_voice.errors import ToolInputError
from openab_voice.jobs import EffectCeiling
from openab_voice.providers.chat import ToolSpec
from openab_voice.tools.registry import ToolContext, ToolRegistry

START_AGENT_TASK: Final = "start_agent_task"
GET_AGENT_TASK: Final = "get_agent_task"
CANCEL_AGENT_TASK: Final = "cancel_agent_task"

_ID = {"type": "string", "description": "The action id, e.g. a-1f3c9e2b"}

SPECS: Final = (
    ToolSpec(
        name=START_AGENT_TASK,
        description=(
            "Propose real work (code, files, research) for a coding agent. It does NOT run now: the "
            "operator must confirm it in the text channel. Tell the user that."
        ),
        parameters={
            "type": "object",
            "properties": {
                "goal": {
                    "type": "string",
                    "description": "What the agent should do, in one or two sentences.",
                },
                "effect_hint": {
                    "type": "string",
                    "description": "The most the work needs to do.",
                    "enum": [c.value for c in EffectCeiling],
                },
            },
            "required": ["goal"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=GET_AGENT_TASK,
        description="Status of a proposed or running task.",
        parameters={
            "type": "object",
            "properties": {"action_id": _ID},
            "required": ["action_id"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=CANCEL_AGENT_TASK,
        description="Cancel a task the user asked for.",
        parameters={
            "type": "object",
            "properties": {"action_id": _ID},
            "required": ["action_id"],
            "additionalProperties": False,
        },
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionFacts:
    """Server-side facts of the voice session the tools are offered in."""

    guild_id: int
    voice_channel_id: int | None
    text_channel_id: int
    generation: int
    session_id: str


def register_action_tools(registry: ToolRegistry, broker: ActionBroker, facts: SessionFacts) -> None:
    """Add the three semantic tools, bound to ``broker`` and this session's ``facts``."""

    async def start(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        goal = str(arguments["goal"]).strip()
        if not goal:
            raise ToolInputError("goal must not be empty")
        request = ActionRequest(
            goal=goal[:2000],
            effect_hint=EffectCeiling(arguments.get("effect_hint", EffectCeiling.WORKSPACE_WRITE.value)),
            call_id=f"{context.turn_id}:{context.call_id}",
            source="tool",
            guild_id=facts.guild_id,
            voice_channel_id=facts.voice_channel_id,
            text_channel_id=facts.text_channel_id,
            session_generation=facts.generation,
            voice_session_id=facts.session_id,
            speaker_id=_int_or_none(context.speaker_id),
        )
        return _outcome(await broker.propose(request))

    async def get(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        record = await broker.get(str(arguments["action_id"]))
        if record is None or record.guild_id != facts.guild_id:
            raise ToolInputError("no such action")
        return {"action_id": record.id, "status": record.status.value, "goal": record.goal[:300]}

    async def cancel(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        record = await broker.get(str(arguments["action_id"]))
        if record is None or record.guild_id != facts.guild_id:
            raise ToolInputError("no such action")
        return _outcome(await broker.cancel(record.id, user_id=_int_or_none(context.speaker_id)))

    registry.register(SPECS[0], start)
    registry.register(SPECS[1], get)
    registry.register(SPECS[2], cancel)


def _outcome(outcome: Outcome) -> dict[str, Any]:
    result: dict[str, Any] = {"ok": outcome.ok, "message": outcome.message}
    if outcome.code:
        result["refused"] = outcome.code
    if outcome.action is not None:
        result |= {"action_id": outcome.action.id, "status": outcome.action.status.value}
    return result


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
