"""The demo report as one self-contained HTML page (``report.html`` beside ``report.json``).

The page holds everything inline: its CSS, and the charts of :mod:`openab_voice.report.charts`
as SVG. It loads nothing (a Content-Security-Policy of ``default-src 'none'`` says so to the browser
too) and runs no script. Every text taken from the report goes through :func:`html.escape`:
transcripts, model output, goals and channel messages are untrusted.

Transcripts may be Chinese: the font stack names CJK faces (Noto Sans CJK first, then the platforms'
own) before the generic ``sans-serif``, and where the charts found no CJK font for some characters
(:attr:`~openab_voice.report.charts.Chart.missing_glyphs`) the page says so under the chart.

matplotlib is the optional ``report`` extra; :func:`require_renderer` turns its absence into a
structured :class:`~openab_voice.errors.ProviderUnavailable` before a demo is run for nothing.
"""

from __future__ import annotations

import html
import importlib.util
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openab_voice.bench.dialogue import TARGETS as BENCH_TARGETS
from openab_voice.bench.stats import summary
from openab_voice.errors import ProviderUnavailable
from openab_voice.report.builder import METRICS

if TYPE_CHECKING:
    from openab_voice.report.charts import Chart  # imports matplotlib: the optional extra

__all__ = ["html_path_for", "render_html", "require_renderer", "write_html"]

# The figures `openab-voice bench dialogue` holds its P95s to, so the page and the bench never disagree.
TARGETS: dict[str, float] = {m: float(BENCH_TARGETS[m]) for m in METRICS if m in BENCH_TARGETS}
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans","Noto Sans CJK SC",
"Noto Sans CJK TC","Source Han Sans SC","PingFang SC","Hiragino Sans GB","Microsoft YaHei","WenQuanYi Zen Hei",
sans-serif;margin:2rem auto;max-width:80rem;padding:0 1.5rem;color:#1a1a1a;line-height:1.45;background:#fff}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
.lead{color:#444;margin-top:0}figure{margin:1rem 0}figure svg{width:100%;height:auto}
figcaption{color:#555;font-size:.9rem}table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{border:1px solid #ddd;padding:.3rem .55rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.bot{background:#f3faf6}del{color:#b3412a}.muted{color:#777}.msg{white-space:pre-wrap;max-width:48rem}
code{background:#f4f4f4;padding:0 .25rem;border-radius:3px}
"""


def require_renderer() -> None:
    """Raise ``PROVIDER_UNAVAILABLE`` (naming the ``report`` extra) when matplotlib is not installed."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ProviderUnavailable(
            "the HTML report draws its charts with matplotlib, which is not installed: "
            "pip install 'openab-voice[report]'",
            kind="report",
            provider="matplotlib",
            extra="report",
        )


def html_path_for(json_path: Path) -> Path:
    """Where the page goes: beside the JSON, same stem (``out/report.json`` -> ``out/report.html``)."""
    if json_path.suffix.lower() == ".html":
        return json_path.with_name(json_path.name + ".html")  # never overwrite the JSON itself
    return json_path.with_suffix(".html")


def write_html(report: Mapping[str, Any], path: Path, *, bot_name: str = "bot") -> Path:
    """Render ``report`` and write it to ``path`` (UTF-8); returns ``path``."""
    path.write_text(render_html(report, bot_name=bot_name), encoding="utf-8")
    return path


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Iterable[int] = ()) -> str:
    """A table; cells are HTML already escaped by the caller."""
    nums = set(numeric)
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    if not headers:  # a key/value table: the first cell of each row names the row
        body = "".join(
            f"<tr><th>{r[0]}</th>" + "".join(f"<td>{c}</td>" for c in r[1:]) + "</tr>" for r in rows
        )
        return f"<table><tbody>{body}</tbody></table>"
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in nums else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _seconds(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else ""


def render_html(report: Mapping[str, Any], *, bot_name: str = "bot") -> str:
    """The whole page for one demo report (the dict :class:`~openab_voice.report.builder.ReportBuilder` builds)."""
    require_renderer()
    from openab_voice.report.charts import latency_chart, timeline_chart  # the optional extra

    names = {uid: str(s.get("name", uid)) for uid, s in report.get("speakers", {}).items()}
    timeline = timeline_chart(report, bot_name=bot_name)
    dave = report.get("dave", {})
    dave_text = (
        f"on, privacy code <code>{_e(dave.get('privacy_code'))}</code>" if dave.get("enabled") else "off"
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(_CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>openab-voice demo report</title><style>{_CSS}</style></head><body>",
        "<h1>openab-voice demo report</h1>",
        f'<p class="lead">{len(names)} speaker(s), {_seconds(report.get("duration_s", 0.0))} s recorded. '
        f"DAVE end-to-end encryption {dave_text}. The bot played {_e(report.get('bot_audio_ms', 0))} ms "
        "of audio that the emulated Discord decoded. All times are seconds since the bot's voice connection "
        "came up.</p>",
        '<section id="timeline"><h2>Timeline</h2>',
        f'<figure id="timeline-chart">{timeline.svg}<figcaption>One lane per '
        "speaker: what the front end detected as speech, the final transcripts (orange when they became a "
        "turn for the bot) with the partials before them, and the echo gate's verdict on each speech onset; "
        "a grey band is the bot's own audio playing. The bot's lane shows the audio actually played with the "
        "text heard (a red cross where it was cut) and its dialogue states; the last lane each action's "
        f"status.{_missing_glyphs(timeline)}</figcaption></figure></section>",
        _latency_section(report.get("metrics", {}), latency_chart),
        _conversation_section(report, names, bot_name),
        _speakers_section(report, names),
        _actions_section(report.get("actions", []), names),
        _channel_section(report.get("text_channel", [])),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _missing_glyphs(chart: Chart) -> str:
    """A note under a chart that drew some characters as boxes: no installed font has them."""
    if not chart.missing_glyphs:
        return ""
    return (
        f' <span class="muted">This machine has no font for {_e(" ".join(chart.missing_glyphs))}: the chart '
        "draws them as boxes (the tables show them as text). Install a CJK font (Debian: "
        "<code>fonts-noto-cjk</code>) and render the report again.</span>"
    )


def _latency_section(
    metrics: Mapping[str, Sequence[float]],
    draw: Callable[[Mapping[str, Sequence[float]], Mapping[str, float]], Chart],
) -> str:
    rows = []
    for metric in METRICS:
        target = TARGETS.get(metric)
        s = summary([float(v) for v in metrics.get(metric, [])])
        p95 = s["p95"]
        verdict = "" if p95 is None or target is None else ("yes" if p95 <= target else "no")
        rows.append(
            [
                f"<code>{_e(metric)}</code>",
                _e(s["n"]),
                _e(s["p50"]),
                _e(p95),
                _e(s["max"]),
                _e(target),
                verdict,
            ]
        )
    table = _table(
        ["metric", "n", "P50 ms", "P95 ms", "max ms", "target P95 ms", "met"], rows, numeric=range(1, 6)
    )
    chart = draw(metrics, TARGETS)
    return (
        '<section id="latency"><h2>Latency</h2>'
        f'<figure id="latency-chart">{chart.svg}<figcaption>Histograms of this run\'s samples; '
        "dashed: median, solid: P95, dotted red: the target P95. A demo run has few samples: "
        "<code>openab-voice bench dialogue</code> measures them properly."
        f"{_missing_glyphs(chart)}</figcaption></figure>"
        f"{table}</section>"
    )


def _split_heard(text: str, heard: str) -> str:
    """The bot's text with its unheard rest struck through (heard text is a prefix when sentences were cut)."""
    if not heard:
        return f"<del>{_e(text)}</del>" if text else '<span class="muted">(nothing)</span>'
    if text.startswith(heard):
        rest = text[len(heard) :]
        return _e(heard) + (f"<del>{_e(rest)}</del>" if rest.strip() else "")
    return f"{_e(heard)} <del>{_e(text)}</del>"


def _conversation_section(report: Mapping[str, Any], names: Mapping[str, str], bot_name: str) -> str:
    rows: list[tuple[float, list[str], bool]] = []
    turns = list(report.get("turns", []))
    for t in report.get("transcripts", []):
        turn = next((d for d in turns if d["speaker"] == t["speaker"] and d["text"] == t["text"]), None)
        if turn is not None:
            turns.remove(turn)
        note = (
            ""
            if turn is None
            else ("turn for the bot" if turn["accepted"] else f"context only ({turn['reason']})")
        )
        who = names.get(t["speaker"], t["speaker"])
        cells = [_seconds(t["start"]), _e(who), _e(t["text"]), _e(note)]
        rows.append((float(t["start"]), cells, False))
    playback = {p["utterance_id"]: p for p in report.get("playback", [])}
    for u in report.get("bot_utterances", []):
        p = playback.get(u.get("utterance_id"))
        at = float(p["start"]) if p is not None else float(u.get("at", 0.0))
        if not u["interrupted"]:
            note = "heard in full"
        elif p is None:
            note = "cut before any of it was played"
        else:
            note = "interrupted: struck-through text was never heard"
        rows.append(
            (at, [_seconds(at), _e(bot_name), _split_heard(u["text"], u["spoken_text"]), _e(note)], True)
        )
    for d in report.get("speech_dropped", []):
        note = f"dropped before it was said ({d['point']}): {d['cause']}: {d['reason']}"
        rows.append(
            (float(d["at"]), [_seconds(d["at"]), _e(bot_name), f"<del>{_e(d['text'])}</del>", _e(note)], True)
        )
    for c in report.get("claims_cut", []):
        note = f"cut before it played: claimed {c['claimed']}, the task is {c['actual']}; said instead: {c['correction']}"
        rows.append(
            (float(c["at"]), [_seconds(c["at"]), _e(bot_name), f"<del>{_e(c['text'])}</del>", _e(note)], True)
        )
    rows.sort(key=lambda r: r[0])
    body = "".join(
        ('<tr class="bot">' if bot else "<tr>") + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
        for _, cells, bot in rows
    )
    return (
        '<section id="conversation"><h2>Conversation</h2>'
        "<p>Final transcripts and the bot's answers in order; only the bot's heard text entered its context.</p>"
        "<table><thead><tr><th>time (s)</th><th>who</th><th>text</th><th>note</th></tr></thead>"
        f"<tbody>{body}</tbody></table></section>"
    )


def _speakers_section(report: Mapping[str, Any], names: Mapping[str, str]) -> str:
    gate = report.get("echo_gate", [])
    rows = []
    for uid, s in report.get("speakers", {}).items():
        dropped = ", ".join(f"{_e(k)} {_e(v)}" for k, v in sorted(s.get("dropped", {}).items())) or "none"
        accepted = sum(1 for g in gate if g["speaker"] == uid and g["accepted"])
        rejected = sum(1 for g in gate if g["speaker"] == uid and not g["accepted"])
        rows.append(
            [
                _e(names.get(uid, uid)),
                _e(uid),
                _e(s.get("packets")),
                _e(s.get("decoded_ms")),
                _e(s.get("lost")),
                _e(s.get("concealed")),
                dropped,
                _e(accepted),
                _e(rejected),
            ]
        )
    headers = [
        "name",
        "id",
        "packets",
        "decoded ms",
        "lost",
        "concealed",
        "dropped",
        "gate: speech",
        "gate: echo",
    ]
    return (
        '<section id="speakers"><h2>Speakers: receive</h2>'
        f"{_table(headers, rows, numeric=(2, 3, 4, 5, 7, 8))}{_backlog(report.get('transcription_backlog', []))}"
        "</section>"
    )


def _backlog(samples: Sequence[Mapping[str, Any]]) -> str:
    """One sentence on whether transcription kept up with the talkers."""
    if not any(s["waiting"] for s in samples):
        return "<p>Transcription kept up: no final ever waited for a decoder.</p>"
    busiest = max(samples, key=lambda s: (s["waiting"], s["oldest_wait_ms"]))
    shed = max(s["partials_shed"] for s in samples)
    return (
        f"<p>Transcription fell behind: up to {_e(busiest['waiting'])} final(s) waited for a decoder (the oldest "
        f"{_e(busiest['oldest_wait_ms'])} ms, at {_seconds(busiest['at'])} s); {_e(shed)} partial decode(s) "
        "were shed to let finals through.</p>"
    )


def _actions_section(actions: Sequence[Mapping[str, Any]], names: Mapping[str, str]) -> str:
    if not actions:
        return '<section id="actions"><h2>Actions</h2><p class="muted">No action was proposed.</p></section>'
    out = ['<section id="actions"><h2>Actions</h2>']
    for a in actions:
        steps = " → ".join(f"{_seconds(t['at'])} s {_e(t['status'])}" for t in a.get("transitions", []))
        decisions = ", ".join(
            f"{_e(d.get('kind'))} {_e(d.get('title'))}: {_e(d.get('option_kind') or d.get('outcome'))}"
            for d in a.get("permission_decisions", [])
        )
        rows = [
            ["goal", _e(a.get("goal"))],
            [
                "proposed by",
                _e(f"{names.get(by, by)} ({by})" if (by := str(a.get("proposed_by", ""))) else ""),
            ],
            ["effect ceiling", _e(a.get("effect_ceiling"))],
            ["status", f"<strong>{_e(a.get('status'))}</strong>"],
            ["transitions", steps],
            ["agent permission decisions", decisions or "none"],
        ]
        out.append(f"<h3><code>{_e(a.get('id'))}</code></h3>{_table([], rows)}")
    out.append("</section>")
    return "".join(out)


def _channel_section(messages: Sequence[Mapping[str, Any]]) -> str:
    """The channel's messages and the ephemeral replies only their user saw, with the command each
    answers and its files (names and sizes: the report never holds a file's body)."""
    rows = []
    for m in messages:
        buttons = ", ".join(_e(b.get("label")) for b in m.get("components", [])) or ""
        notes = [
            f"file {_e(a.get('filename'))}, {_e(a.get('size'))} bytes" for a in m.get("attachments") or []
        ]
        if m.get("ephemeral"):
            notes.insert(0, f"only {_e(m.get('visible_to'))} sees this")
        command = m.get("command")
        rows.append(
            [
                _e(m.get("author")),
                f'<div class="msg">{_e(m.get("content"))}</div>'
                + "".join(f'<div class="muted">{note}</div>' for note in notes),
                f"<code>{_e(command)}</code> by {_e(m.get('command_by'))}" if command else "",
                "yes" if m.get("pinned") else "",
                buttons,
            ]
        )
    table = (
        _table(["author", "message", "reply to", "pinned", "buttons"], rows)
        if rows
        else '<p class="muted">No messages.</p>'
    )
    return f'<section id="text-channel"><h2>Text channel</h2>{table}</section>'
