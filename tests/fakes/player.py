"""A stand-in for discord.py's AudioPlayer: a thread that reads the source every ``period`` seconds."""

from __future__ import annotations

import threading
from collections.abc import Callable

import discord


class FakePlayerHost:
    """Implements the ``PlayerHost`` protocol; records every frame it 'sends'."""

    def __init__(self, *, manual: bool = True) -> None:
        self.manual = manual
        self.source: discord.AudioSource | None = None
        self.after: Callable[[Exception | None], object] | None = None
        self.sent: list[bytes] = []
        self.plays = 0
        self._playing = False

    def play(self, source: discord.AudioSource, *, after: Callable[[Exception | None], object]) -> None:
        self.source, self.after, self._playing = source, after, True
        self.plays += 1

    def is_playing(self) -> bool:
        return self._playing

    def is_connected(self) -> bool:
        return True

    def tick(self) -> bytes:
        """One 20 ms player iteration: read, 'send', stop on an empty read (as discord.py does)."""
        assert self.source is not None
        data = self.source.read()
        if not data:
            self._playing = False
            assert self.after is not None
            self.after(None)
            return b""
        self.sent.append(data)
        return data

    def tick_in_thread(self) -> bytes:
        out: list[bytes] = []
        t = threading.Thread(target=lambda: out.append(self.tick()))
        t.start()
        t.join()
        return out[0]
