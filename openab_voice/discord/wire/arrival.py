"""When a datagram reached this host: the kernel's receive time of the one just read.

discord.py's reader thread hands our listener the bytes alone; stamped with the clock then, a burst
read late under CPU contention would look like it arrived late (ADR 0006, decision 8). Linux's
``ioctl(SIOCGSTAMPNS)`` returns the arrival time of the last datagram the socket handed to user
space, so a listener called right after ``recv`` learns the true arrival. The first call switches
the recording on; where stamps are not available the arrival is the clock's now.
Rationale in detail: docs/adr/0006-audio-plane-under-cpu-contention.md.
"""

from __future__ import annotations

import errno
import socket
import struct
import sys
from collections.abc import Callable
from typing import Final

from openab_voice.clock import Clock, seconds_since_wall_ns

try:
    from fcntl import ioctl
except ImportError:  # not POSIX: arrivals are the reader's time
    ioctl = None  # type: ignore[assignment]

# <linux/sockios.h>: SIOCGSTAMPNS (struct timespec of the last packet passed to the user).
_SIOCGSTAMPNS: Final = 0x8907
_TIMESPEC: Final = struct.Struct("@qq")
# A stamp older than this is not trusted (the wall clock stepped, or it is some earlier datagram's).
MAX_AGE_S: Final = 2.0


class ArrivalStamps:
    """Arrival times of the datagrams a socket reader hands over, on the injected clock.

    Args:
        clock: arrival times are on its ``monotonic()`` timeline.
        socket_source: the socket being read now (read on every call: a reconnect replaces it).

    Only the reader thread calls :meth:`arrival`; the counters are that thread's.
    """

    def __init__(self, clock: Clock, socket_source: Callable[[], socket.socket | None]) -> None:
        self._clock = clock
        self._socket_source = socket_source
        self._available = ioctl is not None and sys.platform.startswith("linux")
        self._buffer = bytes(_TIMESPEC.size)
        self.kernel = 0  # arrivals taken from the kernel's stamp
        self.read = 0  # arrivals taken when the reader got to the datagram
        # The kernel stamps only the datagrams that arrive after recording is on (it hands back
        # "now" for earlier ones): switch it on for the socket there is already.
        if self._available:
            self._age()

    def arrival(self) -> float:
        """When the datagram the socket returned last arrived (call right after ``recv``)."""
        now = self._clock.monotonic()
        if self._available:
            age = self._age()
            if age is not None:
                self.kernel += 1
                return now - age
        self.read += 1
        return now

    def _age(self) -> float | None:
        sock = self._socket_source()
        if sock is None:
            return None
        try:
            raw = ioctl(sock.fileno(), _SIOCGSTAMPNS, self._buffer)
        except OSError as exc:
            # ENOENT: nothing recorded yet (the first call turns recording on); EBADF: the socket
            # was closed under the reader. Anything else: this host cannot give stamps at all.
            if exc.errno not in (errno.ENOENT, errno.EBADF):
                self._available = False
            return None
        except ValueError:  # a closed socket's fileno is -1
            return None
        seconds, nanoseconds = _TIMESPEC.unpack(raw)
        age = seconds_since_wall_ns(seconds * 1_000_000_000 + nanoseconds)
        return age if 0.0 <= age <= MAX_AGE_S else None
