"""Text without spaces (Chinese, Japanese) on the speaking path: sentences, sanitizing, stable
partials and Piper's first synthesis unit count CJK characters where English counts words."""

from __future__ import annotations

import re

import pytest

from openab_voice.engine.sanitizer import speakable
from openab_voice.engine.segmenter import SentenceSegmenter
from openab_voice.providers.scripts import (
    CJK_CHAR_WIDTH,
    chars_for_words,
    has_cjk,
    index_at_width,
    is_cjk,
    join_sentences,
    split_units,
    width,
)
from openab_voice.providers.tts_piper_units import MIN_REST_WORDS, split_first_unit
from openab_voice.stt.stability import StabilityFilter, normalize_words

STEPS = [1, 2, 3, 7, 1000]


def _feed(text: str, step: int, segmenter: SentenceSegmenter | None = None) -> list[str]:
    seg = segmenter or SentenceSegmenter()
    out: list[str] = []
    for i in range(0, len(text), step):
        out += seg.push(text[i : i + step])
    return out + seg.flush()


# --- scripts: what a unit is ---------------------------------------------------------------


def test_a_cjk_character_is_one_unit_and_weighs_three_latin_characters() -> None:
    assert is_cjk("巴") and is_cjk("ひ") and is_cjk("カ")
    assert not is_cjk("a") and not is_cjk("，") and not is_cjk("한")  # Korean writes spaces
    assert has_cjk("I like 巴黎") and not has_cjk("Déjà vu")
    assert split_units("我用Python写代码。") == ["我", "用", "Python", "写", "代", "码", "。"]
    assert split_units("two words") == ["two", "words"]
    assert width("Paris") == 5 and width("巴黎") == 2 * CJK_CHAR_WIDTH
    assert index_at_width("Paris is", 3) == 3  # Latin text: the width is the index
    assert index_at_width("巴黎是法国", 8) == 2 and index_at_width("巴黎是法国", 9) == 3
    assert index_at_width("巴黎", 100) == 2
    assert chars_for_words(4) == 6 and chars_for_words(2) == 3


# --- segmenter -------------------------------------------------------------------------------


@pytest.mark.parametrize("step", STEPS)
def test_chinese_sentences_end_without_a_space(step: int) -> None:
    assert _feed("巴黎是法国的首都。它位于塞纳河畔，人口约两百万。", step) == [
        "巴黎是法国的首都。",
        "它位于塞纳河畔，人口约两百万。",
    ]


@pytest.mark.parametrize("step", STEPS)
def test_terminator_mixes_ellipses_and_closing_quotes_stay_with_their_sentence(step: int) -> None:
    text = "他说：「你好。」然后走了！真的吗？！是的……好吧『再见！』（完。）【注意！】结束"
    assert _feed(text, step) == [
        "他说：「你好。」",
        "然后走了！",
        "真的吗？",  # one sentence; the sanitizer keeps one mark of "？！" as of "?!"
        "是的……",
        "好吧『再见！』",
        "（完。）",
        "【注意！】",
        "结束",
    ]


@pytest.mark.parametrize("step", STEPS)
def test_mixed_chinese_and_english(step: int) -> None:
    text = "我喜欢Python。It is great, e.g. for tests. 你呢？我用 Dr. Smith 的书!好的.再见"
    assert _feed(text, step) == [
        "我喜欢Python。",
        "It is great, e.g. for tests.",
        "你呢？",
        "我用 Dr. Smith 的书!",  # a half-width end between two CJK characters needs no space
        "好的.",
        "再见",
    ]


def test_a_decimal_or_a_dot_after_latin_text_is_no_chinese_sentence_end() -> None:
    assert _feed("版本3.5很好。文件是a.txt吗？", 1) == ["版本3.5很好。", "文件是a.txt吗？"]


def test_a_chinese_sentence_waits_for_what_may_close_it() -> None:
    seg = SentenceSegmenter()
    assert seg.push("「你好。") == []  # a closing quote may still come
    assert seg.push("」") == []
    assert seg.push("他说") == ["「你好。」"]
    assert seg.flush() == ["他说"]


@pytest.mark.parametrize("step", STEPS)
def test_the_first_piece_may_end_at_a_chinese_comma(step: int) -> None:
    seg = SentenceSegmenter(first_clause_chars=16)
    assert _feed("巴黎是法国的首都，它位于塞纳河畔，人口约两百万。它很美，也很古老。", step, seg) == [
        "巴黎是法国的首都，",  # 8 characters say as much as "Paris is the capital of France,"
        "它位于塞纳河畔，人口约两百万。",
        "它很美，也很古老。",
    ]


def test_the_first_chinese_clause_is_never_a_lone_word() -> None:
    seg = SentenceSegmenter(first_clause_chars=16)
    assert seg.push("你好，巴黎是法国的首都") == []  # "你好，" is too short to go alone
    assert seg.push("，") == ["你好，巴黎是法国的首都，"]  # a full-width comma needs nothing after it
    assert seg.push("它很美。") == []
    assert seg.flush() == ["它很美。"]


@pytest.mark.parametrize("step", STEPS)
def test_a_long_chinese_run_is_cut_at_a_clause_mark(step: int) -> None:
    seg = SentenceSegmenter(soft_limit=60, hard_limit=120, min_chars=10)
    text = "我们先看了日志和追踪记录很长时间然后在重试循环里找到了问题，接着修复了它并且写了测试；最后发布了新版本大家都很满意"
    assert _feed(text, step, seg) == [
        "我们先看了日志和追踪记录很长时间然后在重试循环里找到了问题，",
        "接着修复了它并且写了测试；",
        "最后发布了新版本大家都很满意",
    ]


@pytest.mark.parametrize("step", [1, 5, 1000])
def test_a_long_chinese_run_without_any_mark_is_cut_between_characters(step: int) -> None:
    seg = SentenceSegmenter(soft_limit=30, hard_limit=50, min_chars=10)
    text = "我们先看了日志和追踪记录很长时间然后在重试循环里找到了问题接着修复了它并且写了测试"
    pieces = _feed(text, step, seg)
    assert "".join(pieces) == text
    assert len(pieces) > 1 and all(width(piece) <= 50 for piece in pieces)


def test_english_limits_are_unchanged_by_the_widths() -> None:
    seg = SentenceSegmenter(soft_limit=30, hard_limit=50, min_chars=10)
    words = " ".join(f"word{i}" for i in range(20))
    assert _feed(words, 1, seg) == [
        "word0 word1 word2 word3 word4 word5 word6 word7",
        "word8 word9 word10 word11 word12 word13 word14",
        "word15 word16 word17 word18 word19",
    ]


# --- sanitizer -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你好！", "你好！"),
        ("巴黎是法国的首都。", "巴黎是法国的首都。"),
        ("（注意）：你好，世界！「引号」『书名』【标题】《书》、顿号；分号……", None),
        ("ひらがなとカタカナ、漢字。", None),
        ("3～5天，好的～", None),
        ("**重要**：明天下雨。", "重要：明天下雨。"),
        ("这是__重要__的事，~~旧的~~新的", "这是重要的事，旧的新的"),
        ("１２３ＡＢＣ很好", "123ABC很好"),
        ("＊＊粗体＊＊和｜表格｜", "粗体和表格"),
        ("访问https://example.com了解更多。", "访问了解更多。"),
        ("见 https://example.com/a，谢谢", "见，谢谢"),
        ("你好😀世界👍！", "你好世界！"),
        ("真的吗？！？！好！！！", "真的吗？好！"),
        ("，」你好", "你好"),
        ("（）空的「」", "空的"),
        ("空的（）好", "空的好"),
        ("你好 ！", "你好！"),
        ("1、安装\n2、运行", "安装 运行"),
        ("#话题 很好", "话题很好"),
        ("## 标题\n- 第一\n- 第二", "标题 第一 第二"),
        ("我用Python写代码。", "我用Python写代码。"),
    ],
)
def test_speakable_keeps_chinese(text: str, expected: str | None) -> None:
    assert speakable(text) == (text if expected is None else expected)


def test_nothing_chinese_is_stripped_as_junk() -> None:
    text = "今天，我们讨论了三个问题：第一、预算；第二、时间！第三？还有……「其他」（备注）。"
    spoken = speakable(text)
    assert spoken == text
    assert re.sub(r"\W", "", spoken) == re.sub(r"\W", "", text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Jarvis：你好。", "你好。"),
        ("小明：巴黎。", "巴黎。"),
        ("assistant：你好", "你好"),
        ("Jarvis，巴黎是首都。", "巴黎是首都。"),
        ("Jarvis！你好。", "你好。"),
        ("注意：明天下雨。", "注意：明天下雨。"),  # not a name the caller gave
        ("小明，你好。", "小明，你好。"),  # a speaker addressed by name stays
        ("Jarvis。", ""),
    ],
)
def test_labels_and_the_vocative_with_full_width_marks(text: str, expected: str) -> None:
    assert speakable(text, labels=("小明",), own_name="Jarvis") == expected


# --- stability -------------------------------------------------------------------------------


def test_a_chinese_partial_becomes_stable_character_by_character() -> None:
    f = StabilityFilter(2)
    assert not f.update("今天天气")
    assert f.update("今天天气很好") and f.text == "今天天气"
    assert f.update("今天天气很好，我们去公园") and f.text == "今天天气很好，"
    assert not f.update("今天天汽很好，我们去公园吧")  # disagrees inside the stable prefix: no retraction
    assert f.text == "今天天气很好，"


def test_mixed_text_counts_cjk_characters_and_latin_words() -> None:
    assert normalize_words("我用Python写代码，很快。") == ["我", "用", "python", "写", "代", "码", "很", "快"]
    assert normalize_words("Don't stop, OK") == ["don't", "stop", "ok"]
    f = StabilityFilter(2)
    assert not f.update("我用 Python写代码")
    assert f.update("我用Python 写代码吗") and f.text == "我用Python 写代码"
    quoted = StabilityFilter(2)
    assert not quoted.update("“你好，世界")
    assert quoted.update("“你好，世界”") and quoted.text == "“你好，世界”"


# --- Piper's first synthesis unit ------------------------------------------------------------

_INITIALS = ("zh", "ch", "sh", *"bpmfdtnlgkhjqxrzcsyw")


def _pinyin(text: str) -> list[str]:
    """Phonemes as Piper's pinyin voices give them: initial ("Ø": none), final, tone; marks as is."""
    phonemes: list[str] = []
    for token in text.split():
        match = re.fullmatch(r"([a-z]+?)([1-5])", token)
        if match is None:
            phonemes.append(token)
            continue
        base, tone = match.groups()
        initial = next((i for i in _INITIALS if base.startswith(i)), "")
        phonemes += [initial or "Ø", base[len(initial) :], tone]
    return phonemes


def _syllables(phonemes: list[str]) -> str:
    """The pinyin ``_pinyin`` was given back: "ba1 li2 ，"."""
    tokens: list[str] = []
    syllable = ""
    for p in phonemes:
        if p.isdigit():
            tokens.append(syllable + p)
            syllable = ""
        elif p.isalpha():
            syllable += p.replace("Ø", "")
        else:
            tokens.append(p)
    return " ".join(tokens)


def test_a_chinese_first_sentence_is_cut_at_its_comma() -> None:
    # 巴黎是法国的首都，它位于塞纳河畔，人口约两百万。
    phonemes = _pinyin(
        "ba1 li2 shi4 fa3 guo2 de5 shou3 du1 ， ta1 wei4 yu2 sai4 na4 he2 pan4 ， ren2 kou3 yue1 liang3 bai3 wan4 。"
    )
    split = split_first_unit(phonemes, 4)
    assert split is not None and split.at_clause
    assert _syllables(split.first) == "ba1 li2 shi4 fa3 guo2 de5 shou3 du1 ，"
    assert _syllables(split.rest).startswith("ta1 wei4 yu2")
    assert split.first + split.rest == phonemes


def test_a_long_chinese_sentence_without_a_comma_is_cut_after_six_characters() -> None:
    # 我们今天下午在图书馆一起复习数学考试的内容。(4 words: 6 characters)
    phonemes = _pinyin(
        "wo3 men5 jin1 tian1 xia4 wu3 zai4 tu2 shu1 guan3 yi4 qi3 fu4 xi2 shu4 xue2 kao3 shi4 de5 nei4 rong2 。"
    )
    split = split_first_unit(phonemes, 4)
    assert split is not None and not split.at_clause
    assert _syllables(split.first) == "wo3 men5 jin1 tian1 xia4 wu3"
    assert split.first + split.rest == phonemes


def test_a_chinese_first_unit_is_never_a_lone_word_and_a_short_sentence_stays_whole() -> None:
    # 你好，我想请你告诉我埃菲尔铁塔的历史。"你好，" alone is too short: six characters go first.
    named = split_first_unit(
        _pinyin("ni3 hao3 ， wo3 xiang3 qing3 ni3 gao4 su4 wo3 ai1 fei1 er3 tie3 ta3 de5 li4 shi3 。"), 4
    )
    assert named is not None and not named.at_clause
    assert _syllables(named.first) == "ni3 hao3 ， wo3 xiang3 qing3 ni3"
    assert chars_for_words(MIN_REST_WORDS) == 6
    assert split_first_unit(_pinyin("jin1 tian1 tian1 qi4 hen3 hao3 。"), 4) is None  # 今天天气很好。
    # 11 characters: 5 would follow the first 6, fewer than MIN_REST_WORDS' 6.
    eleven = _pinyin("wo3 men5 jin1 tian1 xia4 wu3 qu4 tu2 shu1 guan3 ba5 。")
    assert split_first_unit(eleven, 4) is None
    twelve = _pinyin("wo3 men5 jin1 tian1 xia4 wu3 qu4 tu2 shu1 guan3 fu4 xi2 。")
    assert split_first_unit(twelve, 4) is not None
    assert split_first_unit(twelve, 0) is None


def test_espeak_mandarin_keeps_the_word_rule() -> None:
    # espeak-ng's cmn phonemes for 巴黎是法国的首都, 它位于塞纳河畔. (IPA, words between spaces)
    phonemes = list("pɑ5lˈiɜ s.ˈi.5 fˈɑ2 kˈuoɜ tˈə1 s.ou2tˈu5, thˈɑ5 wˈei5 jˈyɜ sˈai5 nˈɑ5 χˈo-ɜ phˈa5n.")
    split = split_first_unit(phonemes, 4)
    assert split is not None and not split.at_clause
    assert "".join(split.first) == "pɑ5lˈiɜ s.ˈi.5 fˈɑ2 kˈuoɜ"


@pytest.mark.parametrize(
    ("sentences", "text"),
    [
        (["Paris is the capital.", "It is big."], "Paris is the capital. It is big."),
        (["从前有一个小机器人。", "它住在城市里。"], "从前有一个小机器人。它住在城市里。"),
        (["你好。", "Python is fun."], "你好。 Python is fun."),
        (["Hello.", "你好。"], "Hello. 你好。"),
        (["「好。」", "走吧。"], "「好。」走吧。"),
        ([], ""),
        (["One."], "One."),
    ],
)
def test_sentences_join_without_a_space_between_cjk(sentences: list[str], text: str) -> None:
    assert join_sentences(sentences) == text
