"""The demo report's timeline (collected from real bus events) and its HTML page (escaping, structure)."""

from __future__ import annotations

import logging
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from openab_voice.cli import main
from openab_voice.errors import ProviderUnavailable
from openab_voice.report.page import html_path_for, render_html, require_renderer
from tests.fakes.demo_report import ANSWER, STALE, STORY, T0, demo_events, demo_report

HOSTILE = (
    "Jarvis </td></tr></table><script>alert(1)</script><img src=x onerror=alert(2)>"
    ' "quoted" \' & --> <!-- $\\frac{1}{$ <svg onload=alert(3)>'
)


class _Tags(HTMLParser):
    """Every start tag and its attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser


def test_the_report_keeps_each_speakers_timeline(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        report = demo_report()
    assert not caplog.records, "a report handler failed on an event (the bus logs and skips it)"
    assert report["duration_s"] == 22.5
    assert report["speech"] == [
        {"speaker": "1001", "start": 2.5, "end": 4.6, "during_playback": False},
        {"speaker": "1002", "start": 9.0, "end": 11.0, "during_playback": False},
        {"speaker": "1001", "start": 12.0, "end": 13.8, "during_playback": False},
        {"speaker": "1001", "start": 17.0, "end": 18.0, "during_playback": True},
    ]
    assert [(p["speaker"], p["at"], p["stable"]) for p in report["partials"][:2]] == [
        ("1001", 3.1, False),
        ("1001", 3.4, True),
    ]
    # The existing keys of a transcript stay; the timeline adds when it was published and its id.
    first = report["transcripts"][0]
    assert first == {
        "speaker": "1001",
        "text": "Jarvis, what is the capital of France?",
        "start": 2.5,
        "end": 4.6,
        "partials": 2,
        "utterance_id": "1001:1",
        "at": 5.0,
    }
    assert [(t["speaker"], t["accepted"], t["reason"]) for t in report["turns"]] == [
        ("1001", True, ""),
        ("1002", False, "not_addressed"),
        ("1001", True, ""),
    ]
    assert [(g["speaker"], g["at"], g["accepted"]) for g in report["echo_gate"]] == [
        ("1001", 2.5, True),
        ("1001", 6.2, False),
        ("1002", 9.0, True),
        ("1001", 12.0, True),
        ("1001", 17.0, True),
    ]
    assert report["interruptions"] == [
        {"speaker": "1001", "at": 17.06, "turn_id": "turn-2", "state": "speaking", "confidence": 0.9}
    ]
    # Playback is matched to the turn whose response was running when it started; the greeting to none.
    assert [
        (p["utterance_id"], p["turn_id"], p["start"], p["end"], p["interrupted"]) for p in report["playback"]
    ] == [
        ("utt-1", None, 0.3, 2.1, False),
        ("utt-2", "turn-1", 5.7, 7.9, False),
        ("utt-3", "turn-2", 14.8, 17.1, True),
    ]
    answer, story, resumed = report["bot_utterances"]
    # The resumed story shares the turn id but none of its audio: the playback was the first one's.
    assert (resumed["turn_id"], resumed["utterance_id"], resumed["spoken_text"]) == ("turn-2", None, "")
    assert (answer["text"], answer["spoken_text"], answer["interrupted"], answer["utterance_id"]) == (
        ANSWER,
        ANSWER,
        False,
        "utt-2",
    )
    assert (story["text"], story["spoken_text"], story["interrupted"], story["utterance_id"]) == (
        STORY,
        "Once there was a friendly robot.",
        True,
        "utt-3",
    )
    [action] = report["actions"]
    assert action["status"] == "succeeded" and action["effect_ceiling"] == "workspace_write"
    assert [(t["at"], t["status"], t["previous"]) for t in action["transitions"]] == [
        (19.0, "proposed", None),
        (19.2, "delivered", "proposed"),
        (21.0, "confirmed", "delivered"),
        (21.1, "running", "confirmed"),
        (22.0, "succeeded", "running"),
    ]
    assert report["metrics"]["barge_in_ms"] == [100.0]
    assert report["speech_dropped"] == [
        {
            "at": 22.1,
            "turn_id": "announce-1",
            "text": STALE,
            "cause": "action a-1f2e3d4c delivered",
            "reason": "the action is succeeded now",
            "point": "queued",
        }
    ]
    assert [(b["at"], b["waiting"], b["partials_shed"]) for b in report["transcription_backlog"]] == [
        (11.2, 1, 3),
        (11.4, 0, 3),
    ]
    assert report["discarded"] == [{"speaker": "1002", "at": 11.6, "reason": "no_speech"}]


def test_a_speech_end_without_its_start_still_spans_its_audio() -> None:
    from openab_voice.audio.events import SpeechEnded
    from openab_voice.bus import EventBus
    from openab_voice.report.builder import ReportBuilder

    bus = EventBus()
    builder = ReportBuilder(bus)
    bus.publish(demo_events()[0])  # VoiceConnected at T0
    bus.publish(
        SpeechEnded(
            at=T0 + 5.0, speaker_id="7", audio_time=T0 + 4.5, started_audio_time=T0 + 3.0, duration_s=1.5
        )
    )
    report = builder.build(names={"7": "carol"}, bot_audio_ms=0.0)
    builder.close()
    assert report["speech"] == [{"speaker": "7", "during_playback": False, "start": 3.0, "end": 4.5}]
    assert report["duration_s"] == 5.0


def test_hostile_transcripts_are_text_never_markup() -> None:
    report = demo_report(alice_question=HOSTILE)
    report["text_channel"].append(
        {"id": "13", "author": "<b>mallory</b>", "content": HOSTILE, "pinned": False, "components": []}
    )
    report["actions"][0]["goal"] = HOSTILE
    page = render_html(report, bot_name="<i>Jarvis</i>")
    tags = parse(page)
    names = {tag for tag, _ in tags.tags}
    assert not names & {"script", "img", "iframe", "object", "embed", "b", "i", "link"}
    for tag, attrs in tags.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert all("javascript:" not in (v or "") for v in attrs.values())
    # No element that the page does not emit for a harmless report.
    assert names <= {tag for tag, _ in parse(render_html(demo_report(), bot_name="Jarvis")).tags}
    assert page.count("<svg") == 2  # timeline + latency; the hostile "<svg onload" is text
    text = "".join(tags.text)
    # The hostile text arrives whole, as text: in the conversation, the action's goal and the channel.
    assert text.count(HOSTILE) >= 3
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<i>Jarvis</i>" in text and "<b>mallory</b>" in text
    # matplotlib draws its labels as glyph paths and keeps the source text only in XML comments:
    # those must not be closable by a transcript.
    for comment_end in (i for i in range(len(page)) if page.startswith("-->", i)):
        opening = page.rfind("<!--", 0, comment_end)
        assert opening != -1 and "--" not in page[opening + 4 : comment_end].strip(" -")


def test_the_page_has_every_section_and_chart() -> None:
    page = render_html(demo_report(), bot_name="Jarvis")
    ids = {attrs.get("id") for _, attrs in parse(page).tags}
    assert {
        "timeline",
        "timeline-chart",
        "timeline-1001",
        "timeline-1002",
        "timeline-bot",
        "timeline-actions",
        "latency",
        "latency-chart",
        "latency-barge_in_ms",
        "latency-first_stable_partial_ms",
        "latency-eou_to_first_audio_ms",
        "latency-tts_first_chunk_ms",
        "conversation",
        "speakers",
        "actions",
        "text-channel",
    } <= ids
    assert "12345 67890 13579" in page  # the DAVE privacy code
    # The bot's cut answer: the heard sentence plain, the unheard rest struck through.
    assert "Once there was a friendly robot.<del> It helped everyone in town.</del>" in page
    assert "cut before any of it was played" in page
    assert f"<del>{STALE}</del>" in page and "dropped before it was said (queued)" in page
    assert "up to 1 final(s) waited for a decoder (the oldest 200.0 ms, at 11.20 s); 3 partial" in page
    # Self-contained: nothing is fetched from anywhere.
    lowered = page.lower()
    assert 'http-equiv="content-security-policy" content="default-src &#x27;none&#x27;' in lowered
    assert "<script" not in lowered and "<link" not in lowered and "@import" not in lowered
    assert " src=" not in lowered and "url(http" not in lowered
    # Charts are deterministic: the same report gives the same page.
    assert render_html(demo_report(), bot_name="Jarvis") == page


def test_an_empty_report_still_renders() -> None:
    from openab_voice.bus import EventBus
    from openab_voice.report.builder import ReportBuilder

    builder = ReportBuilder(EventBus())
    page = render_html(builder.build(names={"1001": "alice"}, bot_audio_ms=0.0))
    builder.close()
    ids = {attrs.get("id") for _, attrs in parse(page).tags}
    assert {"timeline-1001", "timeline-bot", "latency-barge_in_ms"} <= ids
    assert "timeline-actions" not in ids and "No action was proposed." in page


def test_the_page_goes_beside_the_json() -> None:
    assert html_path_for(Path("out/report.json")) == Path("out/report.html")
    assert html_path_for(Path("out/run-2")) == Path("out/run-2.html")
    assert html_path_for(Path("out/x.html")) == Path("out/x.html.html")  # never over the JSON itself


def test_missing_matplotlib_is_a_structured_error_before_the_demo_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what find_spec reports for an absent package
    with pytest.raises(ProviderUnavailable) as info:
        require_renderer()
    assert info.value.code == "PROVIDER_UNAVAILABLE" and info.value.details["extra"] == "report"
    assert main(["demo", "--report", str(tmp_path / "out" / "report.json")]) == 1
    err = capsys.readouterr().err
    assert "[PROVIDER_UNAVAILABLE]" in err and "openab-voice[report]" in err
    assert not (tmp_path / "out").exists()  # failed before running anything
