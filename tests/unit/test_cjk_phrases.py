"""Names and phrases in either script (issue 34): a wake name that lists names per script, Chinese
text without spaces, the task phrase, "remember that" and backchannels in Chinese, simplified and
traditional; English stays as it was."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from openab_voice.actions.phrases import asks_to_run, task_goal
from openab_voice.clock import FakeClock
from openab_voice.engine.backchannel import Verdict, classify, words_of
from openab_voice.engine.turns import (
    EarlyNames,
    TurnPolicy,
    addresses,
    is_preamble,
    name_as_heard_early,
    name_tokens,
    only_address,
    opens_with_name,
    wake_names,
    without_address,
)
from openab_voice.memory.intake import ACK_SAVED, ACK_SAVED_ZH, RememberIntake, remembered_text
from openab_voice.memory.long_term import LongTermMemory
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.memory_rows import MemoryRows
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.dialogue_fakes import FakeRoster

WAKE = "Jarvis, 賈維斯, 贾维斯"


def test_a_wake_name_lists_names_separated_by_commas() -> None:
    assert wake_names(WAKE) == ("Jarvis", "賈維斯", "贾维斯")
    assert wake_names("Jarvis，贾维斯、小贾") == ("Jarvis", "贾维斯", "小贾")  # full-width separators
    assert wake_names("Jarvis") == ("Jarvis",) and wake_names(" , ") == ()


def test_chinese_text_is_a_word_per_character() -> None:
    assert name_tokens("贾维斯今天天气怎么样") == list("贾维斯今天天气怎么样")
    assert name_tokens("Jarvis今天OK吗") == ["jarvis", "今", "天", "ok", "吗"]
    assert name_tokens("ＪＡＲＶＩＳ，你好！") == ["jarvis", "你", "好"]  # full-width letters fold
    assert name_tokens("Élan, vital!") == ["elan", "vital"]


@pytest.mark.parametrize(
    "text",
    [
        "贾维斯，今天天气怎么样？",
        "贾维斯今天天气怎么样",  # no separator after the name
        "今天天气怎么样，贾维斯？",
        "今天天气怎么样贾维斯",
        "嘿贾维斯…",
        "喂，贾维斯，在吗",
        "你好贾维斯，几点了",
        "賈維斯，今天天氣怎麼樣？",  # traditional
        "你好，賈維斯",
        "Jarvis，今天天气怎么样？",  # mixed scripts
        "Jarvis今天天气怎么样",
        "今天天气怎么样，Jarvis？",
        "Jarvis, what time is it?",  # English as before
        "hey Jarvis what time is it",
        "Jurtis, tell me a story.",  # a Latin name keeps its tolerance
    ],
)
def test_any_listed_name_addresses_the_bot(text: str) -> None:
    assert addresses(text, WAKE)


@pytest.mark.parametrize(
    "text",
    [
        "今天天气怎么样",
        "我昨天问了贾维斯一个问题",  # the name inside is no address
        "大维斯，今天天气怎么样",  # another first sound (da for jia)
        "觉得是，今天天气怎么样",  # jue de shi: other sounds
        "贾维，今天天气怎么样",  # part of the name
        "鲍勃，午饭吃什么？",
        "好贾维斯，几点了",  # "好" is no vocative
        "",
    ],
)
def test_other_chinese_speech_does_not_address_the_bot(text: str) -> None:
    assert not addresses(text, WAKE)


@pytest.mark.parametrize(
    "heard",
    # What the multilingual Whisper base wrote for "贾维斯" in shipped-voice lines (ADR 0023), and the
    # traditional form: the same name to the ear.
    ["假为是", "脚圍絲", "蔣維斯", "價為斯", "加维斯", "賈維斯"],
)
def test_a_chinese_name_is_heard_by_its_sound(heard: str) -> None:
    assert addresses(f"{heard}，今天天气怎么样？", "Jarvis, 贾维斯")
    assert without_address(f"{heard}，今天天气怎么样？", "Jarvis, 贾维斯") == "今天天气怎么样？"
    assert not addresses(f"我觉得{heard}说得对", "Jarvis, 贾维斯")  # inside a sentence: no address


def test_a_name_is_matched_only_in_its_own_script() -> None:
    assert not addresses("贾维斯，今天天气怎么样", "Jarvis")
    assert not addresses("Jarvi斯，hi", "Nova")  # a Latin name never takes a Chinese character as a letter


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("贾维斯，今天天气怎么样？", "今天天气怎么样？"),
        ("贾维斯今天天气怎么样", "今天天气怎么样"),
        ("今天天气怎么样，贾维斯？", "今天天气怎么样？"),
        ("嘿，賈維斯：講個笑話。", "講個笑話。"),
        ("你好贾维斯，几点了", "几点了"),
        ("Jarvis，今天天气怎么样", "今天天气怎么样"),
        ("Hey Jarvis, what time is it?", "What time is it?"),
        ("贾维斯？", "贾维斯？"),  # only the name: left as said
        ("我喜欢贾维斯这个名字", "我喜欢贾维斯这个名字"),
    ],
)
def test_without_address_takes_the_name_that_matched_off(text: str, expected: str) -> None:
    assert without_address(text, WAKE) == expected


@pytest.mark.parametrize(
    ("text", "alone"),
    [
        ("贾维斯。", True),
        ("嘿，賈維斯", True),
        ("你好贾维斯", True),
        ("Jarvis.", True),
        ("谢谢贾维斯", False),
    ],
)
def test_only_address_in_either_script(text: str, alone: bool) -> None:
    assert only_address(text, WAKE) is alone


def test_a_prefix_opens_with_a_chinese_name() -> None:
    assert opens_with_name("贾维斯，今天", WAKE) and opens_with_name("嘿贾维斯", WAKE)
    assert not opens_with_name("今天，贾维斯", WAKE)


def test_a_final_gets_back_the_chinese_name_its_partials_heard() -> None:
    final = "大维斯，今天天气怎么样"  # misheard past the name's sound (da for jia)
    assert name_as_heard_early(final, "贾维斯，今天", WAKE) == "贾维斯，今天天气怎么样"
    assert name_as_heard_early("大维斯，明天呢", "贾维斯，今天", WAKE) is None  # the words after differ
    early = EarlyNames()
    early.note("u1", "賈維斯，今天", WAKE)
    assert early.heard("u1", "打維斯，今天天氣", WAKE, final=True) == "賈維斯，今天天氣"


def test_the_turn_policy_takes_the_configured_list() -> None:
    roster = FakeRoster({"alice": "Alice", "bob": "Bob", "bot": "Jarvis"}, bots=["bot"])
    policy = TurnPolicy(roster=roster, wake_name=WAKE, bot_user_id="bot")
    for text in ("贾维斯，几点了", "賈維斯，幾點了", "Jarvis, what time is it"):
        assert policy.decide(speaker_id="alice", text=text).reason == "addressed"
    assert policy.decide(speaker_id="alice", text="鲍勃，几点了").reason == "not_addressed"


def test_a_display_name_with_a_comma_is_one_name() -> None:
    roster = FakeRoster({"alice": "Alice", "bob": "Bob", "bot": "Jarvis, the bot"}, bots=["bot"])
    policy = TurnPolicy(roster=roster, wake_name=None, bot_user_id="bot")
    assert policy.decide(speaker_id="alice", text="Jarvis the bot, hello").accepted
    assert not policy.decide(speaker_id="alice", text="The bot is slow today").accepted


def test_a_preamble_is_fillers_and_at_most_the_name() -> None:
    fillers = frozenset({"please", "嗯", "请", "好的"})
    assert is_preamble("", None, fillers=fillers) and is_preamble("嗯，好的，", None, fillers=fillers)
    assert is_preamble("嗯，贾维斯，请", WAKE, fillers=fillers)
    assert is_preamble("Jarvis, please", WAKE, fillers=fillers)
    assert not is_preamble("你能", WAKE, fillers=fillers)
    assert not is_preamble("贾维斯，请", None, fillers=fillers)  # a name, but none configured


@pytest.mark.parametrize(
    ("text", "goal"),
    [
        ("开始一个任务：写发布说明", "写发布说明"),
        ("开始任务，修复构建", "修复构建"),
        ("启动任务修复构建", "修复构建"),
        ("請開始一個任務：整理 README", "整理 README"),
        ("啟動任務，更新變更日誌", "更新變更日誌"),
        ("开始一项任务——更新文档", "更新文档"),
        ("贾维斯，开始一个任务：写发布说明", "写发布说明"),
        ("賈維斯，請開始任務：跑測試", "跑測試"),
        ("嗯，贾维斯，请开始任务：检查测试通过了吗", "检查测试通过了吗"),
        ("帮我开始一个任务，修复构建", "修复构建"),
        ("Jarvis，开始一个任务：写一首诗", "写一首诗"),  # mixed scripts
        ("贾维斯, start a task: write the notes", "write the notes"),
        ("Jarvis, please start a task to fix the build", "to fix the build"),  # English as before
    ],
)
def test_the_chinese_task_phrase_yields_the_goal(text: str, goal: str) -> None:
    assert task_goal(text, wake_name=WAKE) == goal


@pytest.mark.parametrize(
    ("text", "wake_name"),
    [
        ("你能开始一个任务吗", WAKE),  # a question about tasks
        ("我们现在不应该开始任务", WAKE),
        ("我昨天开始了一个任务", WAKE),  # a past task
        ("开始一个任务吗？", WAKE),  # no goal, a question
        ("开始任务", None),
        ("开始任务。", WAKE),
        ("开始一个任务：……", None),
        ("鲍勃，开始一个任务：运行测试", WAKE),  # someone else's name
        ("贾维斯，开始一个任务：运行测试", None),  # a name, but no wake name configured
        ("启动任务管理器", WAKE),  # "launch the Task Manager"
        ("打开任务栏", WAKE),
        ("确认任务", WAKE),
        ("是的", WAKE),
        ("Bob, 开始任务：运行测试", WAKE),
    ],
)
def test_not_a_chinese_task_phrase(text: str, wake_name: str | None) -> None:
    assert task_goal(text, wake_name=wake_name) is None


def test_a_chinese_goal_can_ask_to_run_things() -> None:
    assert asks_to_run("修复解析器并运行测试") and asks_to_run("編譯一下") and asks_to_run("run the tests")
    assert not asks_to_run("写发布说明")


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("记住周五开会", "周五开会"),
        ("请记住：爱丽丝喜欢喝茶", "爱丽丝喜欢喝茶"),
        ("記住，會議改到三點", "會議改到三點"),
        ("記得明天帶傘", "明天帶傘"),
        ("记下来：备份在周日", "备份在周日"),
        ("记住不要迟到", "不要迟到"),
        ("贾维斯，请记住：周五开会", "周五开会"),
        ("賈維斯，記住週五開會", "週五開會"),
        ("Jarvis，记住周五开会", "周五开会"),
        ("嗯，还有，记住我喜欢绿茶", "我喜欢绿茶"),
        ("贾维斯, remember that the demo is tomorrow", "the demo is tomorrow"),
        ("Remember that Alice prefers tea.", "Alice prefers tea."),  # English as before
    ],
)
def test_remember_in_either_script(text: str, fact: str) -> None:
    assert remembered_text(text, wake_name=WAKE) == fact


@pytest.mark.parametrize(
    "text",
    [
        "你还记得那部电影吗",  # a question
        "记得那部电影吗？",
        "记住什么？",
        "我记得那天",  # a statement
        "我不记得了",
        "记住了",  # "got it", not a request
        "记住了吗",
        "记住没有",
        "记住",  # nothing to remember
        "不要记住这个",
        "鲍勃，记住明天有演示",  # addressed to Bob
        "Do you remember that film?",
    ],
)
def test_not_a_remember_phrase(text: str) -> None:
    assert remembered_text(text, wake_name=WAKE) is None


class _Embedder:
    """The same unit vector for every text: these tests save, they never search."""

    dimension = 4
    fingerprint = "test/ones/4"

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return np.full((len(texts), 4), 0.5, dtype=np.float32)


def final(text: str, utterance_id: str) -> TranscriptFinal:
    return TranscriptFinal(
        at=0.0,
        session_id="s1",
        speaker_id="1001",
        utterance_id=utterance_id,
        text=text,
        audio_start=0.0,
        audio_end=1.0,
        partials=1,
    )


async def test_the_acknowledgement_is_in_the_phrases_language(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    engine = open_engine(url)
    memory = LongTermMemory(MemoryRows(engine), _Embedder(), path=tmp_path / "vectors.bin", clock=FakeClock())
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    try:
        assert memory.open().ok
        intake = RememberIntake(memory, guild_id=1, wake_name=lambda: WAKE, say=say)
        assert intake.offer(final("贾维斯，记住周五开会", "u1"))
        await intake.aclose()
        intake = RememberIntake(memory, guild_id=1, wake_name=lambda: WAKE, say=say)
        assert intake.offer(final("Jarvis, remember that the demo is on Friday", "u2"))
        assert not intake.offer(final("你还记得那部电影吗", "u3"))
        await intake.aclose()
    finally:
        memory.close()
        engine.dispose()
    assert said == [ACK_SAVED_ZH, ACK_SAVED]
    assert ACK_SAVED_ZH == "好的，我记住了。" and ACK_SAVED == "Okay, I'll remember that."


@pytest.mark.parametrize(
    "text",
    [
        "嗯",
        "嗯嗯",
        "对",
        "对对对",
        "好的",
        "是的",
        "好的，我知道了",
        "哦，原来如此",
        "對，沒錯",
        "不错",
        "嗯 okay",
    ],
)
def test_chinese_acknowledgements_are_backchannels(text: str) -> None:
    assert classify(text, duration_s=0.6, wake_name=WAKE) is Verdict.BACKCHANNEL


@pytest.mark.parametrize(
    "text",
    [
        "等等",
        "停",
        "停一下",
        "好的，等等",
        "不对",
        "嗯，不是",
        "等一下，贾维斯",
        "賈維斯",
        "对，但是",
        "Okay, 等等",
    ],
)
def test_chinese_cut_words_and_names_are_commands(text: str) -> None:
    assert classify(text, duration_s=0.6, wake_name=WAKE) is Verdict.COMMAND


@pytest.mark.parametrize("text", ["今天天气怎么样", "对对对对对", "好的，给我讲讲", "Okay 我们走吧"])
def test_other_chinese_words_are_speech(text: str) -> None:
    assert classify(text, duration_s=0.6, wake_name=WAKE) is Verdict.SPEECH


def test_chinese_words_are_the_listed_ones_longest_first() -> None:
    assert words_of("好的，我知道了！") == ("好的", "我知道了")
    assert words_of("不错") == ("不错",) and words_of("不行") == ("不", "行")
    assert words_of("Mm-hmm, 嗯") == ("mmhmm", "嗯")
