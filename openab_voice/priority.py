"""CPU priority of the audio plane and of compute threads: audio keeps real time first (ADR 0006).

Audio-plane threads raise their priority by :data:`AUDIO_BOOST` (:func:`boost_audio_thread`; needs
``CAP_SYS_NICE`` or a permissive ``RLIMIT_NICE``, else logged once); speech synthesis by the smaller
:data:`RESPONSE_BOOST` (:func:`boost_response_thread`); the LLM worker, and the speech-to-text decode
threads when the audio plane could not be raised (:func:`audio_boost_available`), lower theirs by
:data:`COMPUTE_NICE` (:func:`lower_current_thread`). Native libraries' threads inherit the priority
of the thread that starts them. Rationale: docs/adr/0006-audio-plane-under-cpu-contention.md.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Final

__all__ = [
    "AUDIO_BOOST",
    "COMPUTE_NICE",
    "RESPONSE_BOOST",
    "audio_boost_available",
    "available_cpus",
    "boost_audio_thread",
    "boost_response_thread",
    "lower_current_thread",
]

log = logging.getLogger(__name__)

COMPUTE_NICE: Final = 5  # CFS weight 335 against 1024 at nice 0: about a quarter of a shared core
AUDIO_BOOST: Final = 5  # nice -5: weight 3121, three times a nice-0 thread's
RESPONSE_BOOST: Final = 3  # nice -3: weight 1991, twice a nice-0 thread's, two thirds of the audio plane's
_warned = False
_boost: bool | None = None  # whether raising an audio thread worked (None: not tried yet)


def boost_audio_thread() -> bool:
    """Raise the calling (audio-plane) thread's priority by :data:`AUDIO_BOOST`.

    Returns:
        True when it was raised; False without the privilege or a per-thread priority (logged once).
    """
    global _boost
    error = _renice(-AUDIO_BOOST)
    if error is not None and _boost is None:
        log.warning("cannot raise the audio threads' priority (%s): compute threads yield instead", error)
    _boost = error is None
    return _boost


def boost_response_thread() -> bool:
    """Raise the calling (speech synthesis) thread's priority by :data:`RESPONSE_BOOST`.

    Without the privilege it stays at normal priority (what :func:`boost_audio_thread` logs once).

    Returns:
        True when it was raised.
    """
    return _renice(-RESPONSE_BOOST) is None


def audio_boost_available() -> bool:
    """Whether audio threads can be raised here (tried once, on a short-lived probe thread)."""
    if _boost is None:
        probe = threading.Thread(target=boost_audio_thread, name="openab-voice-priority-probe")
        probe.start()
        probe.join()
    return bool(_boost)


def lower_current_thread(nice: int = COMPUTE_NICE) -> bool:
    """Lower the calling thread's CPU priority by ``nice`` (Linux: per-thread nice value).

    Returns:
        True when the priority was lowered; False where per-thread priorities are not available.
    """
    global _warned
    if nice <= 0:
        return False
    error = _renice(nice)
    if error is not None and not _warned:
        _warned = True
        log.warning("cannot lower compute thread priority (%s): audio shares the CPU evenly", error)
    return error is None


def _renice(delta: int) -> Exception | None:
    """Move the calling thread's nice value by ``delta`` (clamped to -20..19); the error, if any."""
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, max(-20, min(19, current + delta)))
    except (AttributeError, OSError) as exc:
        return exc
    return None


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
