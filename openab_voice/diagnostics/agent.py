"""``openab-voice self-test agent``: the real conversation manager on fake providers, in virtual time.

Everything but the providers is the production code: the state machine, turn policy, context,
response runner (with the real sentence segmenter), speech handles, interruption controller, the
ToolRouter (the one tool path, auditing into memory) and the real long-term memory (SQLite and the
FAISS vector file in a temporary directory, the offline MiniLM embedder) behind the real
``memory_search`` tool. The chat model, TTS and speaker are the fakes of
:mod:`openab_voice.testing.dialogue_fakes`, driven by a :class:`~openab_voice.clock.FakeClock`, so
the run is deterministic.

Three turns (:mod:`openab_voice.diagnostics.agent_turns`) on that stage
(:mod:`openab_voice.diagnostics.agent_harness`, which also says how virtual time waits for the
memory's worker threads): a question and its answer, an interruption during playback, a memory
search through the tool router.

Returns ``{"passed": bool, "turns": [...], "memory": {...}, "latency_ms": {...}}``; any failed check
(or a crash) makes ``passed`` False. No check is skipped or faked.
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
    # Every to_thread of the run (memory search, audit write) goes to the executor the clock waits on.
    asyncio.get_running_loop().set_default_executor(h.workers)
    turns: list[dict[str, Any]] = []
    try:
        async with h.output:
            await h.manager.start()
            try:
                for scenario in (question_answer, interruption, memory_search):
                    turn = await scenario(h)
                    turns.append(_report(h, turn, len(h.events)))
            finally:
                await h.manager.aclose()
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
