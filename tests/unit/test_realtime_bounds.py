"""A realtime session lives as long as the call: what it keeps per response or per event is bounded
(issue 29: two of its collections grew for the session's whole life)."""

from __future__ import annotations

from openab_voice.engine.realtime.provider import STALE_KEPT, RecentIds


def test_recent_ids_keep_the_newest_and_forget_the_oldest() -> None:
    recent = RecentIds(STALE_KEPT)
    recent.update([f"resp_{n}" for n in range(10 * STALE_KEPT)])
    assert len(recent) == STALE_KEPT
    assert f"resp_{10 * STALE_KEPT - 1}" in recent and f"resp_{10 * STALE_KEPT - STALE_KEPT}" in recent
    assert "resp_0" not in recent and f"resp_{10 * STALE_KEPT - STALE_KEPT - 1}" not in recent
    recent.add("resp_0")  # re-added: the newest again
    assert "resp_0" in recent and len(recent) == STALE_KEPT
    recent.clear()
    assert len(recent) == 0
