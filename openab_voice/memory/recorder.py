"""Recording one voice session's transcript into the store, off the event loop.

:class:`TranscriptRecorder` listens for the session's ``TranscriptFinal`` (a speaker's final, with the
speech's own start and end) and ``BotUtteranceFinished`` (its ``spoken_text``: only what was heard,
so interrupted speech is stored up to where it was cut). Lines queue in memory and one writer task
stores them in batches through a worker thread, so a slow disk never holds up the event loop; each
batch also widens the session's audience (who was in the channel) that ``/voice transcript`` checks.
Event times are the injected clock's monotonic seconds; rows get wall time from the same clock.

The recorder is an observer, so it stays on the bus (ADR 0015): it acts on nothing it hears, and a
final it stores may also be a task request the desk gave an intake. The bus carries every session's
events, so it keeps only its own session's (``session_id``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass

from openab_voice.bus import EventBus
from openab_voice.bus.bus import Subscription
from openab_voice.clock import Clock
from openab_voice.engine.events import BotUtteranceFinished
from openab_voice.lifecycle import Lifecycle
from openab_voice.store.transcripts import LineKind, NewLine, TranscriptStore
from openab_voice.stt.events import TranscriptFinal

__all__ = ["RecorderPlace", "TranscriptRecorder"]

log = logging.getLogger(__name__)

_BATCH = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class RecorderPlace:
    """Where the session is, from server-side state.

    Attributes:
        audience: who is in the channel now (Discord user ids, the bot excluded).
        name_of: a speaker's display name from their id.
    """

    guild_id: int
    channel_id: int
    channel_name: str
    bot_id: str
    bot_name: Callable[[], str]
    audience: Callable[[], Collection[int]]
    name_of: Callable[[str], str]


class TranscriptRecorder:
    """Stores one voice session's finals and the bot's heard utterances.

    Args:
        retention_s: sessions that started longer ago are deleted when this one starts (None: kept).
    """

    def __init__(
        self,
        store: TranscriptStore,
        *,
        bus: EventBus,
        clock: Clock,
        session_id: str,
        place: RecorderPlace,
        retention_s: float | None = None,
    ) -> None:
        self._store = store
        self._bus = bus
        self._clock = clock
        self._session_id = session_id
        self._place = place
        self._retention_s = retention_s
        self._queue: asyncio.Queue[NewLine | asyncio.Future[None] | None] = asyncio.Queue()
        self._subscriptions: list[Subscription] = []
        self._task: asyncio.Task[None] | None = None
        # running: the session's record opens (a second start() does nothing), then the write loop runs
        self._life = Lifecycle("transcript recorder")
        self.written = 0
        self.write_failures = 0

    async def start(self) -> None:
        """Open the session's record (and apply retention), then listen. Once only."""
        if not self._life.new:
            return
        self._life.start()
        place, now = self._place, self._clock.wall()
        await asyncio.to_thread(
            self._store.open_session,
            self._session_id,
            guild_id=place.guild_id,
            channel_id=place.channel_id,
            channel_name=place.channel_name,
            started_at=now,
        )
        if self._retention_s is not None:
            purged = await asyncio.to_thread(self._store.purge, started_before=now - self._retention_s)
            if purged:
                log.info("transcripts: %d voice session(s) past retention deleted", purged)
        if self._life.closed:  # closed while the record opened: nothing to listen to
            await self._end_record()
            return
        self._subscriptions = [
            self._bus.subscribe(TranscriptFinal, self._on_final),
            self._bus.subscribe(BotUtteranceFinished, self._on_bot),
        ]
        self._task = asyncio.create_task(self._write_loop(), name=f"transcripts-{self._session_id}")

    async def flush(self) -> None:
        """Wait until every line queued so far is stored (or its write failed)."""
        if self._task is None or self._task.done():
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(done)
        await done

    async def aclose(self) -> None:
        """Stop listening, store what is queued, and mark the session ended. Idempotent."""
        if not self._life.begin_close():
            return
        for subscription in self._subscriptions:
            subscription.close()
        if self._task is None:
            self._life.finish_close()
            return
        self._queue.put_nowait(None)
        await self._task
        await self._end_record()
        self._life.finish_close()

    async def _end_record(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._store.close_session, self._session_id, ended_at=self._clock.wall())

    # --- events ---------------------------------------------------------------------------------

    def _on_final(self, event: TranscriptFinal) -> None:
        if event.session_id != self._session_id or not event.text.strip():
            return
        self._queue.put_nowait(
            NewLine(
                kind=LineKind.SPEECH,
                speaker_id=event.speaker_id,
                speaker_name=self._place.name_of(event.speaker_id),
                text=event.text.strip(),
                started_at=self._wall(event.audio_start),
                ended_at=self._wall(event.audio_end),
            )
        )

    def _on_bot(self, event: BotUtteranceFinished) -> None:
        if event.session_id != self._session_id or not event.spoken_text.strip():
            return
        at = self._wall(event.at)
        self._queue.put_nowait(
            NewLine(
                kind=LineKind.BOT,
                speaker_id=self._place.bot_id,
                speaker_name=self._place.bot_name(),
                text=event.spoken_text.strip(),
                started_at=at,
                ended_at=at,
            )
        )

    def _wall(self, monotonic: float) -> float:
        return self._clock.wall() - (self._clock.monotonic() - monotonic)

    # --- writer ---------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        stop = False
        while not stop:
            items = [await self._queue.get()]
            while len(items) < _BATCH and not self._queue.empty():
                items.append(self._queue.get_nowait())
            lines = [item for item in items if isinstance(item, NewLine)]
            stop = any(item is None for item in items)
            if lines:
                await self._write(lines)
            for item in items:
                if isinstance(item, asyncio.Future) and not item.done():
                    item.set_result(None)

    async def _write(self, lines: list[NewLine]) -> None:
        audience = tuple(self._place.audience())
        try:
            await asyncio.to_thread(self._store.add, self._session_id, lines, audience=audience)
        except Exception:  # a lost batch is logged and counted; recording goes on
            self.write_failures += 1
            log.warning(
                "transcripts: %d line(s) of %s not stored", len(lines), self._session_id, exc_info=True
            )
        else:
            self.written += len(lines)
