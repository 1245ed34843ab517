"""The Chinese wake name on real speech: the multilingual Whisper base never writes "贾维斯" for it
(it writes 假为是, 蔣維斯, 架为私 …), so the name is heard by its sound (engine/name_sounds.py), and the
task and "记住" phrases after it still work. The shipped Chinese clips, decoded for real."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openab_voice.actions.phrases import task_goal
from openab_voice.audio import scenes
from openab_voice.engine.turns import addresses
from openab_voice.errors import ProviderUnavailable
from openab_voice.memory.intake import remembered_text
from openab_voice.stt.base import SpeechToText, SttConfig
from openab_voice.stt.faster_whisper import create

WAKE = "Jarvis, 賈維斯, 贾维斯"
ADDRESSED = ("zh/wake_weather", "zh/wake_capital", "zh/wake_hey_task", "zh/wake_remember", "zh/wake_hello")


@pytest.fixture(scope="module")
def heard() -> Iterator[dict[str, str]]:
    try:
        stt: SpeechToText = create(SttConfig(model="base", language="zh"))
    except ProviderUnavailable as exc:
        pytest.skip(f"the multilingual model is not installed: {exc}")
    try:
        names = [*ADDRESSED, "zh/named_inside"]
        yield {name: stt.transcribe(scenes.load_clip(name), final=True).text for name in names}
    finally:
        stt.close()


def test_the_name_is_heard_at_the_start_and_not_inside_a_sentence(heard: dict[str, str]) -> None:
    for name in ADDRESSED:
        assert addresses(heard[name], WAKE), (name, heard[name])
    assert not addresses(heard["zh/named_inside"], WAKE), heard["zh/named_inside"]


def test_the_phrases_work_after_the_heard_name(heard: dict[str, str]) -> None:
    task, remember = heard["zh/wake_hey_task"], heard["zh/wake_remember"]
    goal = task_goal(task, wake_name=WAKE)  # "写发布说明", as heard
    assert goal and task.endswith(goal) and not any(w in goal for w in ("任务", "任務", "贾", "嘿")), task
    fact = remembered_text(remember, wake_name=WAKE)  # "周五开会", as heard
    assert fact and remember.endswith(fact) and not any(w in fact for w in ("记住", "記住")), remember
