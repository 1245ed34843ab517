"""What the bot keeps beyond a turn.

The meeting record: each voice session's transcript (speakers' finals and what the bot was heard
saying) stored when ``OPENAB_TRANSCRIPT_STORE`` is on (:mod:`.recorder`), and what ``/voice
transcript`` and ``/voice summary`` make of it for the people who were there (:mod:`.meeting`).

Long-term memory (``OPENAB_MEMORY_ENABLED``): typed records in SQL and their vectors from the offline
all-MiniLM-L6-v2 embedder (:mod:`.embedder`) in a FAISS index (:mod:`.long_term`, :mod:`.vectors`),
checked for consistency before anything is read; the sensitivity filter (:mod:`.sensitivity`); the
turn's recall (:mod:`.recall`), the ``memory_search`` / ``memory_save`` tools (:mod:`.tools`) and the
spoken "remember that ..." (:mod:`.intake`)."""

from openab_voice.memory.meeting import MeetingRecords, Refusal, Summary, TranscriptExport
from openab_voice.memory.recorder import TranscriptRecorder

__all__ = ["MeetingRecords", "Refusal", "Summary", "TranscriptExport", "TranscriptRecorder"]
