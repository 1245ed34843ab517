"""The HTML report with a Chinese conversation: CJK glyphs in the charts, CJK faces in the page's fonts,
and an honest note (never a warning turned error) where no CJK font is installed."""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest
from matplotlib.artist import Artist
from matplotlib.figure import Figure

from openab_voice.report import charts
from openab_voice.report.page import render_html
from tests.fakes.demo_report import demo_report

QUESTION = "法国的首都是什么？"
ANSWER = "好的，我记住了。"
# A glyph's outline, defined once per SVG: ``<path id="<font>-<glyph index>" d="..."``.
_GLYPH = re.compile(r'<path id="([A-Za-z][\w-]*-[0-9a-f]+)" d="([^"]+)"')


def chinese_report(question: str = QUESTION) -> dict[str, Any]:
    """The demo, with alice (named 小明) asking in Chinese and the bot answering in Chinese."""
    report = demo_report(alice_question=question)
    report["speakers"]["1001"]["name"] = "小明"
    answer = report["bot_utterances"][0]
    answer["text"] = answer["spoken_text"] = ANSWER
    return report


def glyphs(svg: str) -> set[str]:
    """The outlines (path data) of every glyph the SVG draws."""
    return {d for _, d in _GLYPH.findall(svg)}


@pytest.fixture
def cjk_font() -> str:
    family = charts.cjk_family()
    if family is None:
        pytest.skip("no CJK font installed: scripts/setup.sh installs Debian's fonts-noto-cjk")
    return family


def test_chinese_is_drawn_with_real_glyphs(cjk_font: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fa = charts.timeline_chart(chinese_report("法"), bot_name="Jarvis")
        guo = charts.timeline_chart(chinese_report("国"), bot_name="Jarvis")
    assert not caught, [str(w.message) for w in caught]
    assert fa.missing_glyphs == guo.missing_glyphs == ""
    # The two charts differ by one character: each has one outline the other lacks, and they differ.
    # (A missing glyph would be the same box in both: no outline of its own.)
    only_fa, only_guo = glyphs(fa.svg) - glyphs(guo.svg), glyphs(guo.svg) - glyphs(fa.svg)
    assert len(only_fa) == len(only_guo) == 1
    assert only_fa != only_guo


def test_the_chinese_page_renders_without_a_warning_or_a_note(cjk_font: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        page = render_html(chinese_report(), bot_name="Jarvis")
    assert not caught, [str(w.message) for w in caught]
    assert "no font for" not in page
    assert QUESTION in page and ANSWER in page  # the tables hold the text itself


def test_the_page_names_cjk_faces_before_the_generic_family() -> None:
    page = render_html(demo_report(), bot_name="Jarvis")
    stack = re.search(r"body\{font-family:([^;]+);", page)
    assert stack is not None
    families = [f.strip().strip('"') for f in stack.group(1).split(",")]
    assert families[-1] == "sans-serif"
    assert {
        "Noto Sans CJK SC",
        "Noto Sans CJK TC",
        "Source Han Sans SC",
        "PingFang SC",
        "Microsoft YaHei",
    } <= set(families)


def test_without_a_cjk_font_the_chart_draws_boxes_and_the_page_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(charts, "cjk_family", lambda: None)
    # The suite turns warnings into errors: matplotlib's missing-glyph warning must not escape.
    chart = charts.timeline_chart(chinese_report(), bot_name="Jarvis")
    assert set(QUESTION + ANSWER + "小明") == set(chart.missing_glyphs)
    page = render_html(chinese_report(), bot_name="Jarvis")
    assert page.count("This machine has no font for 小 明 法 国") == 1  # the timeline; latency is Latin
    assert "<code>fonts-noto-cjk</code>" in page


class _Warns(Artist):
    def draw(self, renderer: Any) -> None:
        warnings.warn("not a glyph", DeprecationWarning, stacklevel=1)


def test_other_warnings_while_rendering_still_reach_the_caller() -> None:
    fig = Figure()
    fig.add_artist(_Warns())
    with pytest.warns(DeprecationWarning, match="not a glyph"):
        charts.render_svg(fig, salt="test")
