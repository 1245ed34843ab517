"""The demo report's charts: matplotlib figures rendered to standalone SVG text.

Figures are built on :class:`matplotlib.figure.Figure` directly, never through ``pyplot``: no GUI
backend, no global figure registry, safe to call from a library. Text is drawn as glyph paths
(``svg.fonttype = "path"``), so the page renders the same without any font, and ``parse_math`` is off
on every label because transcripts are untrusted and ``$...$`` would otherwise be parsed as mathtext.
Each chart has its own ``svg.hashsalt``: its generated ids are deterministic and never collide with
another chart's on the same page. Groups carry stable ids (``timeline-<speaker id>``, ``timeline-bot``,
``timeline-actions``, ``latency-<metric>``) that the page and its render test rely on.

Chinese (and Japanese, Korean) text is drawn from a fallback font: ``font.family`` is ``["sans-serif",
<CJK family>]`` and matplotlib (3.6 and later) takes each glyph DejaVu Sans lacks from the CJK face.
:func:`cjk_family` picks the first installed of :data:`CJK_FAMILIES` from matplotlib's own font list,
first registering system fonts installed after matplotlib cached that list (``fontManager.addfont``;
nothing is downloaded). Without one (Debian: ``fonts-noto-cjk``) the characters are still drawn, as the
default font's missing-glyph box: :func:`render_svg` records matplotlib's "Glyph ... missing from font(s)"
warnings around its one ``savefig`` (every other warning goes on to the caller's filters, nothing is
silenced globally), and :attr:`Chart.missing_glyphs` lets the page say which characters are boxes and
which font to install. Like ``rc_context``, that recording is process-wide state: render from one thread.
"""

from __future__ import annotations

import functools
import io
import re
import unicodedata
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
from matplotlib import font_manager
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
BLUE, ORANGE, GREEN, VERMILION = "#0072B2", "#E69F00", "#009E73", "#D55E00"
SKY, PURPLE, YELLOW, GREY = "#56B4E9", "#CC79A7", "#F0E442", "#999999"
STATE_COLORS = {
    "idle": "#DDDDDD",
    "listening": "#BFE3F5",
    "thinking": YELLOW,
    "speaking": GREEN,
    "interrupted": VERMILION,
    "tool_running": PURPLE,
    "recovering": ORANGE,
}
STATUS_COLORS = {
    "proposed": YELLOW,
    "delivered": YELLOW,
    "confirmed": SKY,
    "running": BLUE,
    "succeeded": GREEN,
    "failed": VERMILION,
    "delivery_failed": VERMILION,
    "outcome_unknown": VERMILION,
}
METRIC_TITLES = {
    "barge_in_ms": "Barge-in: interrupting speech onset → bot audio stopped",
    "first_stable_partial_ms": "First stable partial: speech start → first stable transcript",
    "eou_to_first_audio_ms": "End of utterance → first audio of the answer",
    "tts_first_chunk_ms": "TTS first chunk: sentence sent → first synthesized audio",
}
WIDTH_IN = 12.0
_PT_PER_CHAR = 3.9  # average half-width glyph advance at the 7 pt label size, to fit labels to their bar
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_RC: dict[Any, Any] = {
    "svg.fonttype": "path",
    "font.size": 8.0,
    "axes.titlesize": 9.5,
    "axes.titleweight": "bold",
}
# Simplified Chinese first (the users' language), then the other Han forms and common platform faces.
CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans CJK TC",
    "Noto Sans CJK JP",
    "Noto Sans CJK KR",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "Noto Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "PingFang SC",
    "Hiragino Sans GB",
    "Microsoft YaHei",
    "SimHei",
)
# matplotlib's words (_text_helpers.warn_on_missing_glyph): "Glyph 27861 (...) missing from font(s) ..."
_MISSING_GLYPH = re.compile(r"Glyph (\d+) \(.*\) missing from font")


@dataclass(frozen=True, slots=True, kw_only=True)
class Chart:
    """A rendered chart: its inline ``<svg>`` element and the characters no installed font could draw."""

    svg: str
    missing_glyphs: str = ""  # each character once, first drawn first; drawn as boxes


def element_id(*parts: str) -> str:
    """An id safe in SVG and HTML built from trusted prefixes and (digit) speaker ids."""
    return _ID_UNSAFE.sub("_", "-".join(parts))


def _installed_cjk() -> str | None:
    names = {f.name for f in font_manager.fontManager.ttflist}
    return next((family for family in CJK_FAMILIES if family in names), None)


@functools.cache
def cjk_family() -> str | None:
    """The first of :data:`CJK_FAMILIES` that matplotlib can draw with, or ``None`` when none is installed."""
    found = _installed_cjk()
    if found is None:
        # matplotlib lists the system's fonts once and caches the list (~/.cache/matplotlib): a font
        # installed since is not in it. Add the font files it has never seen, as a rebuild would.
        known = {f.fname for f in font_manager.fontManager.ttflist}
        for path in font_manager.findSystemFonts():
            if path not in known:
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):  # a broken font file: skipped, as a rebuild does
                    continue
        found = _installed_cjk()
    return found


def _rc() -> dict[Any, Any]:
    """The charts' settings, with the CJK fallback font when one is installed."""
    cjk = cjk_family()
    return {**_RC, "font.family": ["sans-serif", cjk] if cjk else ["sans-serif"]}


def render_svg(fig: Figure, *, salt: str) -> Chart:
    """The figure as an ``<svg>`` element (no XML prolog or doctype: it goes inline into HTML)."""
    buf = io.StringIO()
    missing: dict[str, None] = {}
    with (
        matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}),
        warnings.catch_warnings(record=True) as caught,
    ):
        # Recorded, every time (not once per place): a missing glyph becomes a note on the page.
        warnings.filterwarnings("always", message=_MISSING_GLYPH.pattern, category=UserWarning)
        fig.savefig(buf, format="svg", metadata={"Date": None})
    for w in caught:
        if (glyph := _MISSING_GLYPH.match(str(w.message))) is not None:
            missing[chr(int(glyph.group(1)))] = None
        else:  # not ours to judge: back through the caller's filters
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    text = buf.getvalue()
    return Chart(svg=text[text.index("<svg") :], missing_glyphs="".join(missing))


def _fit(text: str, cells: int) -> str:
    """``text`` shortened with "…" to ``cells`` half-width cells (a CJK character takes two)."""
    widths = [2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text]
    if sum(widths) <= cells:
        return text
    kept, used = [], 0
    for char, width in zip(text, widths, strict=True):
        if used + width > cells - 1:
            break
        kept.append(char)
        used += width
    return "".join(kept).rstrip() + "…"


def _label(
    ax: Axes, x0: float, x1: float, y: float, text: str, *, clip: Artist | None = None, color: str = "black"
) -> None:
    """``text`` from ``x0``, shortened to end by ``x1`` and clipped to ``clip`` (default: that span)."""
    fig_width_pt = WIDTH_IN * 72.0 * 0.86  # the axes' share of the figure's width
    lo, hi = ax.get_xlim()
    cells = int((x1 - x0) / max(hi - lo, 1e-9) * fig_width_pt / _PT_PER_CHAR)
    if cells < 3:
        return
    text = _fit(text, cells)
    if clip is None:
        clip = Rectangle((x0, y - 0.5), x1 - x0, 1.0, transform=ax.transData)  # only a clip path, never drawn
    label = ax.text(
        x0 + (hi - lo) * 0.002, y, text, fontsize=7, va="center", ha="left", color=color, parse_math=False
    )
    label.set_clip_path(clip)  # type: ignore[arg-type]


def _spans(items: Sequence[Mapping[str, Any]], end: float) -> list[tuple[Mapping[str, Any], float]]:
    """Each timestamped item with the time the next one starts (the last one lasts until ``end``)."""
    stops = [float(nxt["at"]) for nxt in items[1:]] + [end]
    return list(zip(items, stops, strict=False))  # no items: no spans (stops still holds ``end``)


def _until_next(starts: Sequence[float], i: int, end: float) -> float:
    """Where the label of item ``i`` must stop: the next item's start on the same row, or the end."""
    return min([s for s in starts[i + 1 :] if s > starts[i]] + [end])


def _bar(ax: Axes, x0: float, x1: float, y: float, h: float, **style: Any) -> Rectangle:
    rect = Rectangle((x0, y - h / 2), max(x1 - x0, 0.02), h, **style)
    ax.add_patch(rect)
    return rect


class _Legend:
    """Legend entries in first-drawn order; only what a chart actually shows gets an entry."""

    def __init__(self) -> None:
        self.handles: dict[str, Artist] = {}

    def patch(self, label: str, **style: Any) -> None:
        self.handles.setdefault(label, Patch(label=label, **style))

    def marker(self, label: str, **style: Any) -> None:
        self.handles.setdefault(label, Line2D([], [], linestyle="none", label=label, **style))

    def line(self, label: str, **style: Any) -> None:
        self.handles.setdefault(label, Line2D([], [], label=label, **style))


def _rows(ax: Axes, labels: Sequence[str]) -> None:
    """Row labels top to bottom on the y axis (row i sits at y = len - i)."""
    ax.set_yticks(range(len(labels), 0, -1), list(labels))
    ax.set_ylim(0.4, len(labels) + 0.6)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#E5E5E5", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def _playing(ax: Axes, report: Mapping[str, Any], end: float, legend: _Legend) -> None:
    """The bot's playback as a light band behind a speaker's rows (echo and barge-in context)."""
    for p in report.get("playback", []):
        ax.axvspan(p["start"], p["end"] if p["end"] is not None else end, color="#EEEEEE", zorder=0)
        legend.patch("bot audio playing (background band)", color="#EEEEEE")


def _speaker_lane(
    ax: Axes, uid: str, name: str, report: Mapping[str, Any], end: float, legend: _Legend
) -> None:
    ax.set_gid(element_id("timeline", uid))
    ax.set_title(f"{name} (speaker {uid})", loc="left")
    _rows(ax, ["speech (VAD)", "transcript", "echo gate"])
    _playing(ax, report, end, legend)
    for seg in (s for s in report.get("speech", []) if s["speaker"] == uid):
        hatch = "////" if seg["during_playback"] else None
        stop = seg["end"] if seg["end"] is not None else end
        _bar(ax, seg["start"], stop, 3, 0.5, facecolor=BLUE, edgecolor=SKY if hatch else BLUE, hatch=hatch)
        if hatch:
            legend.patch("speech while the bot was playing", facecolor=BLUE, edgecolor=SKY, hatch=hatch)
        else:
            legend.patch("speech (VAD start → end)", color=BLUE)
    turns = [t for t in report.get("turns", []) if t["speaker"] == uid]
    finals = sorted(
        (t for t in report.get("transcripts", []) if t["speaker"] == uid), key=lambda t: t["start"]
    )
    starts = [float(t["start"]) for t in finals]
    for n, t in enumerate(finals):
        turn = next((d for d in turns if d["text"] == t["text"]), None)
        if turn is not None:
            turns.remove(turn)
        if turn is None:
            color, what = SKY, "final transcript"
        elif turn["accepted"]:
            color, what = ORANGE, "final transcript: a turn for the bot"
        else:
            color, what = "#F6D9A8", "final transcript: context only (not for the bot)"
        _bar(ax, t["start"], t["end"], 2, 0.55, color=color)
        legend.patch(what, color=color)
        # The label may run on past its bar (demo utterances are short) up to the next one.
        _label(ax, t["start"], _until_next(starts, n, end * 1.01), 2, f"“{t['text']}”")
        if "at" in t:
            ax.plot([t["at"]], [2.38], marker="v", color="black", markersize=4, linestyle="none")
            legend.marker("final published", marker="v", color="black", markersize=4)
    for d in (d for d in report.get("discarded", []) if d["speaker"] == uid):
        ax.plot([d["at"]], [2], marker="s", color=GREY, markersize=4, linestyle="none")
        legend.marker("utterance discarded (no usable text)", marker="s", color=GREY, markersize=4)
    for p in (p for p in report.get("partials", []) if p["speaker"] == uid):
        color = "#555555" if p["stable"] else "#BBBBBB"
        ax.plot([p["at"]], [1.6], marker="|", color=color, markersize=7, linestyle="none")
        legend.marker("stable partial" if p["stable"] else "partial", marker="|", color=color, markersize=7)
    for g in (g for g in report.get("echo_gate", []) if g["speaker"] == uid):
        if g["accepted"]:
            ax.plot([g["at"]], [1], marker="o", color=GREEN, markersize=5, linestyle="none")
            legend.marker("echo gate: onset accepted as speech", marker="o", color=GREEN, markersize=5)
        else:
            ax.plot([g["at"]], [1], marker="x", color=VERMILION, markersize=6, linestyle="none")
            legend.marker("echo gate: onset rejected (echo)", marker="x", color=VERMILION, markersize=6)
    for i in (i for i in report.get("interruptions", []) if i["speaker"] == uid):
        ax.axvline(i["at"], color=VERMILION, linestyle="--", linewidth=1.2)
        ax.text(i["at"], 3.45, " barge-in", color=VERMILION, fontsize=7, va="center", parse_math=False)
        legend.line("barge-in (interruption detected)", color=VERMILION, linestyle="--")


def _bot_lane(ax: Axes, bot: str, report: Mapping[str, Any], end: float, legend: _Legend) -> None:
    ax.set_gid("timeline-bot")
    ax.set_title(f"{bot} (the bot)", loc="left")
    _rows(ax, ["audio heard", "dialogue state"])
    by_utterance = {u["utterance_id"]: u for u in report.get("bot_utterances", []) if u.get("utterance_id")}
    played = list(report.get("playback", []))
    starts = [float(p["start"]) for p in played]
    for n, p in enumerate(played):
        stop = p["end"] if p["end"] is not None else end
        said = by_utterance.get(p["utterance_id"])
        color = GREEN if said is not None else GREY
        _bar(ax, p["start"], stop, 2, 0.55, color=color, alpha=0.55)
        legend.patch(
            "answer audio played (label: the text heard)" if said else "other audio", color=color, alpha=0.55
        )
        heard = said["spoken_text"] if said is not None else ""
        if said is not None and said["interrupted"]:
            heard = heard or "(cut before a whole sentence)"
            ax.plot([stop], [2.42], marker="X", color=VERMILION, markersize=8, linestyle="none")
            legend.marker("cut: the rest was never heard", marker="X", color=VERMILION, markersize=8)
        if said is None:
            heard = "greeting / other audio"
        _label(ax, p["start"], _until_next(starts, n, end * 1.01), 2, heard)
    for u in report.get("bot_utterances", []):
        if u.get("utterance_id") is None and "at" in u:
            ax.plot([u["at"]], [2.42], marker="X", color=VERMILION, markersize=8, linestyle="none")
            legend.marker("cut: the rest was never heard", marker="X", color=VERMILION, markersize=8)
    for d in report.get("speech_dropped", []):
        ax.plot([d["at"]], [2], marker="D", color=PURPLE, markersize=6, linestyle="none")
        legend.marker("stale speech dropped (never said)", marker="D", color=PURPLE, markersize=6)
    for s, stop in _spans(report.get("states", []), end):
        rect = _bar(ax, s["at"], stop, 1, 0.55, color=STATE_COLORS.get(s["state"], GREY), linewidth=0)
        _label(ax, s["at"], stop, 1, s["state"], clip=rect)


def _actions_lane(ax: Axes, actions: Sequence[Mapping[str, Any]], end: float) -> None:
    ax.set_gid("timeline-actions")
    ax.set_title("Actions (status after each transition)", loc="left")
    _rows(ax, [a["id"] for a in actions])
    for row, action in zip(range(len(actions), 0, -1), actions, strict=True):
        for step, stop in _spans(action.get("transitions", []), end):
            color = STATUS_COLORS.get(step["status"], GREY)
            rect = _bar(ax, step["at"], stop, row, 0.55, facecolor=color, edgecolor="white", linewidth=0.8)
            _label(ax, step["at"], stop, row, step["status"], clip=rect)


def timeline_chart(report: Mapping[str, Any], *, bot_name: str = "bot") -> Chart:
    """One lane per speaker, one for the bot, one for the actions; a shared axis of seconds since connect."""
    speakers = list(report.get("speakers", {}).items())
    actions = list(report.get("actions", []))
    end = max(float(report.get("duration_s", 0.0)), 1.0)
    heights = [1.45] * len(speakers) + [1.1] + ([0.5 + 0.3 * len(actions)] if actions else [])
    legend = _Legend()
    with matplotlib.rc_context(_rc()):
        fig = Figure(figsize=(WIDTH_IN, sum(heights) + 1.4), layout="constrained")
        fig.set_gid("timeline-figure")
        grid = fig.add_gridspec(len(heights), 1, height_ratios=heights)
        first = fig.add_subplot(grid[0])
        lanes = [first] + [fig.add_subplot(grid[i], sharex=first) for i in range(1, len(heights))]
        first.set_xlim(0.0, end * 1.01)
        for ax, (uid, entry) in zip(lanes, speakers, strict=False):
            _speaker_lane(ax, uid, str(entry.get("name", uid)), report, end, legend)
        _bot_lane(lanes[len(speakers)], bot_name, report, end, legend)
        if actions:
            _actions_lane(lanes[-1], actions, end)
        for ax in lanes[:-1]:
            ax.tick_params(axis="x", labelbottom=False)
        lanes[-1].set_xlabel("seconds since the bot connected to voice")
        fig.legend(
            handles=list(legend.handles.values()),
            loc="outside upper center",
            ncols=4,
            frameon=False,
            fontsize=7.5,
        )
        return render_svg(fig, salt="openab-timeline")


def latency_chart(metrics: Mapping[str, Sequence[float]], targets: Mapping[str, float]) -> Chart:
    """A histogram per latency metric with its P50, P95 and target (milliseconds)."""
    with matplotlib.rc_context(_rc()):
        fig = Figure(figsize=(WIDTH_IN, 5.4), layout="constrained")
        fig.set_gid("latency-figure")
        for ax, (metric, title) in zip(fig.subplots(2, 2).flat, METRIC_TITLES.items(), strict=True):
            _histogram(ax, metric, title, [float(v) for v in metrics.get(metric, [])], targets.get(metric))
        return render_svg(fig, salt="openab-latency")


def _histogram(ax: Axes, metric: str, title: str, values: list[float], target: float | None) -> None:
    ax.set_gid(element_id("latency", metric))
    ax.set_title(f"{title} (n = {len(values)})", loc="left", fontsize=8.5)
    ax.set_xlabel("milliseconds")
    ax.set_ylabel("samples")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if target is not None:
        ax.axvline(target, color=VERMILION, linestyle=":", linewidth=1.5, label=f"target P95 ≤ {target:g} ms")
    if not values:
        ax.text(0.5, 0.5, "no samples in this run", transform=ax.transAxes, ha="center", color="#666666")
        ax.set_yticks([])
    else:
        arr = np.asarray(values)
        # From 0 ms, with the target in view and fixed-width bins: a few samples still read as a spread.
        top = max(float(arr.max()), target or 0.0) * 1.15
        ax.hist(arr, bins=np.linspace(0.0, top, 41).tolist(), color=BLUE, edgecolor="white")
        ax.set_xlim(0.0, top)
        p50, p95 = (float(v) for v in np.percentile(arr, [50, 95]))
        ax.axvline(p50, color="black", linestyle="--", linewidth=1, label=f"P50 {p50:.0f} ms")
        ax.axvline(p95, color="black", linewidth=1.2, label=f"P95 {p95:.0f} ms")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(frameon=True, framealpha=0.9, edgecolor="none", fontsize=7, loc="best")
