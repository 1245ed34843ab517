"""A task's spoken lines in the language it was asked in: every status has its Chinese line, and the
result is announced in the goal's language (docs/adr/0023)."""

from __future__ import annotations

import pytest

from openab_voice.actions.results import Refusals, spoken_status
from openab_voice.actions.speech import STATUS_LINES, STATUS_LINES_ZH, language_of, status_line
from openab_voice.jobs import JobStatus
from openab_voice.providers.scripts import has_cjk


def test_every_status_has_one_line_in_each_language() -> None:
    assert STATUS_LINES.keys() == STATUS_LINES_ZH.keys() == set(JobStatus)
    for status in JobStatus:
        assert status_line(status) == STATUS_LINES[status] and not has_cjk(status_line(status))
        assert status_line(status, "zh") == STATUS_LINES_ZH[status] and has_cjk(status_line(status, "zh"))
    assert status_line(None, "zh") == "我还没有开始任何任务。"


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("开始一个任务：写发布说明", "zh"),
        ("開始任務，跑測試", "zh"),
        ("start a task: write notes", "en"),
        ("", "en"),
    ],
)
def test_the_language_of_what_was_said(text: str, language: str) -> None:
    assert language_of(text) == language


def test_the_result_is_announced_in_the_goals_language() -> None:
    said = spoken_status(execution="succeeded", output="Added README.md", all_trusted=False, language="zh")
    assert said == "任务完成了。结果在文字频道里。"
    detailed = spoken_status(execution="succeeded", output="Added README.md", all_trusted=True, language="zh")
    assert detailed == "任务完成了。Added README.md 完整结果在文字频道里。"
    assert (
        spoken_status(execution="failed", output="", all_trusted=True, language="zh")
        == "任务失败了。结果在文字频道里。"
    )
    one_of_two = Refusals(asked=2, refused=("write /etc/passwd",), ceiling="workspace_write")
    partly = spoken_status(
        execution="succeeded", output="", all_trusted=True, refused=one_of_two, language="zh"
    )
    assert partly == "任务完成了，但它的2个权限请求中有1个被拒绝了。结果在文字频道里。"
    # English is unchanged.
    assert spoken_status(execution="succeeded", output="x", all_trusted=False) == (
        "The task is done. The result is in the text channel."
    )
