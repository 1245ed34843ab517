"""The meeting record: each voice session's transcript (speakers' finals and what the bot was heard
saying) stored when ``OPENAB_TRANSCRIPT_STORE`` is on (:mod:`.recorder`), and what ``/voice transcript``
and ``/voice summary`` make of it for the people who were there (:mod:`.meeting`)."""

from openab_voice.memory.meeting import MeetingRecords, Refusal, Summary, TranscriptExport
from openab_voice.memory.recorder import TranscriptRecorder

__all__ = ["MeetingRecords", "Refusal", "Summary", "TranscriptExport", "TranscriptRecorder"]
