"""Waits bounded on the event loop's own clock, which ruff's banned-api rule cannot see.

ruff (TID251, pyproject.toml) bans ``asyncio.sleep``, ``asyncio.wait_for``, ``asyncio.timeout`` and
``time.monotonic`` outside ``clock.py``; it cannot ban one keyword of a call. This check finds the
rest of the ways to read the loop's clock: ``asyncio.wait(..., timeout=...)`` and scheduling with
``call_later`` / ``call_at``. What is left is listed below with why it stays on real time, and each
entry must still be found (a stale entry fails too).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "openab_voice"

# path (relative to the package) -> why its loop-clock wait stays
ALLOWED: dict[str, str] = {
    "providers/worker.py": "bounds a close on jobs running on a real thread; providers get no clock",
    "testing/harness.py": "a hang guard: a bot that never answers fails the test instead of hanging it",
    "testing/emulator/clients.py": "a hang guard on a discord.py client getting ready",
    "bench/soak.py": "a hang guard on the soak's last round after its end",
}


def loop_clock_waits(source: str) -> list[int]:
    """Line numbers of the calls in ``source`` that bound or schedule on the loop's own clock."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr, owner = node.func.attr, node.func.value
        waits = (
            attr == "wait"
            and isinstance(owner, ast.Name)
            and owner.id == "asyncio"
            and any(k.arg == "timeout" for k in node.keywords)
        )
        if waits or attr in ("call_later", "call_at"):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_checker_finds_each_form() -> None:
    source = (
        "import asyncio\n"
        "async def f(t, loop):\n"
        "    await asyncio.wait({t}, timeout=1.0)\n"
        "    await asyncio.wait({t})\n"  # no bound: fine
        "    loop.call_later(1.0, print)\n"
        "    asyncio.get_running_loop().call_at(5.0, print)\n"
        "    await asyncio.wait({t}, return_when=asyncio.FIRST_COMPLETED)\n"
    )
    assert loop_clock_waits(source) == [3, 5, 6]


def test_only_the_listed_modules_wait_on_the_loops_clock() -> None:
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "clock.py":
            continue
        lines = loop_clock_waits(path.read_text(encoding="utf-8"))
        if lines:
            found[relative] = lines
    unlisted = {path: lines for path, lines in found.items() if path not in ALLOWED}
    assert not unlisted, (
        f"bound these on the injected clock (openab_voice.clock.bounded / wait_for): {unlisted}"
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"no loop-clock wait left in {stale}: take them off ALLOWED"
