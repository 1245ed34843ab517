"""``openab-voice self-test agent``: the real conversation manager on fake providers, in virtual time.

Everything but the chat model, TTS and speaker (the fakes of :mod:`openab_voice.testing.dialogue_fakes`)
is production code, the ToolRouter and the real long-term memory included, in the tests' conversation
rig (:mod:`openab_voice.testing.rig`) on its self-advancing virtual clock. Three turns (:mod:`openab_voice.diagnostics.agent_turns`) on
the stage of :mod:`openab_voice.diagnostics.agent_harness`. Returns ``{"passed": bool, "turns": [...],
"memory": {...}, "latency_ms": {...}}``; any failed check or crash makes ``passed`` False; no check is skipped
or faked. In detail: docs/adr/0013-duplex-voice-engine.md.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.diagnostics.agent_harness import Harness
from openab_voice.diagnostics.agent_turns import Turn, interruption, memory_search, question_answer
from openab_voice.engine.events import DialogueStateChanged

__all__ = ["run_agent_self_test"]


def _report(h: Harness, turn: Turn, end: int) -> dict[str, Any]:
    return {
        "name": turn.name,
        "passed": all(c["passed"] for c in turn.checks),
        "checks": turn.checks,
        "states": [
            f"{e.previous}->{e.state}"
            for e in h.events[turn.start : end]
            if isinstance(e, DialogueStateChanged)
        ],
        "played": h.played_sentences(turn.started_at),
    }


async def _run(root: Path) -> dict[str, Any]:
    h = Harness(root)
    turns: list[dict[str, Any]] = []
    try:
        # While the rig runs, every to_thread (memory search, audit write) goes to the executor its
        # clock waits on.
        async with h:
            for scenario in (question_answer, interruption, memory_search):
                turn = await scenario(h)
                turns.append(_report(h, turn, len(h.events)))
    finally:
        h.memory.close()
    errors = [f"{e.code}: {e.message}" for e in h.events if isinstance(e, ErrorRaised)]
    latency: dict[str, list[float]] = {}
    for e in h.events:
        if isinstance(e, LatencyMeasured):
            latency.setdefault(e.metric, []).append(round(e.value_ms, 1))
    return {
        "passed": bool(turns) and all(t["passed"] for t in turns) and not errors,
        "turns": turns,
        "errors": errors,
        "memory": h.memory.report(),
        "context": h.manager.context.dump(),
        "latency_ms": latency,
    }


def run_agent_self_test() -> dict[str, Any]:
    """Run the three-turn agent self-test; see the module docstring."""
    try:
        with tempfile.TemporaryDirectory(prefix="openab-selftest-") as root:
            return asyncio.run(_run(Path(root)))
    except Exception as exc:  # a crash is a failed self-test, reported like any other failure
        return {"passed": False, "turns": [], "errors": [f"{type(exc).__name__}: {exc}"]}
