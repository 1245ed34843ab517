"""CPU priority of compute threads: the audio plane keeps real time first (ADR 0006).

The bot's process runs two kinds of work on the same few cores: the audio plane (discord.py's reader
and player threads, the receive worker, the audio front end, the event loop), which must keep up
with the 20 ms packet clock, and bulk compute (speech-to-text decodes, LLM generation, speech
synthesis), which can wait a little. When the machine is short of CPU, the kernel's scheduler has to
know which is which: every provider's compute thread lowers its own scheduling priority by
:data:`COMPUTE_NICE` before it does any work, and threads that native libraries (CTranslate2,
llama.cpp, onnxruntime) start from it inherit that priority. Nothing is raised, so no privilege is
needed; where the platform has no per-thread priority, nothing changes and the first attempt logs it.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Final

__all__ = ["COMPUTE_NICE", "available_cpus", "lower_current_thread"]

log = logging.getLogger(__name__)

COMPUTE_NICE: Final = 5  # CFS weight 335 against the audio plane's 1024: about a quarter of a shared core
_warned = False


def lower_current_thread(nice: int = COMPUTE_NICE) -> bool:
    """Lower the calling thread's CPU priority by ``nice`` (Linux: per-thread nice value).

    Returns:
        True when the priority was lowered; False where per-thread priorities are not available.
    """
    global _warned
    if nice <= 0:
        return False
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + nice))
    except (AttributeError, OSError) as exc:
        if not _warned:
            _warned = True
            log.warning("cannot lower compute thread priority (%s): audio shares the CPU evenly", exc)
        return False
    return True


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
