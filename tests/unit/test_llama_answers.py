"""Answers worth hearing from the offline model: the real SmolLM2-135M on fixed questions.

The path is the engine's own, minus audio: the conversation's context builder (wake name taken off,
no speaker labels), the llama provider's message formatting (the small-model prompt and its example
exchange), then the sentence segmenter with the speech sanitizer and the small-model sentence cap.
Temperature 0 and a fixed seed make the answers repeatable; the measured answers are printed (run
with ``-s``). What a 135M model cannot do is not asserted; what the context makes it do, is.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from openab_voice.clock import perf_ns
from openab_voice.engine.context import ShortTermContext, UserUtterance
from openab_voice.engine.segmenter import SentenceSegmenter
from openab_voice.engine.settings import SMALL_MODEL_PROMPT, SMALL_MODEL_SENTENCES
from openab_voice.engine.turns import name_tokens, without_address
from openab_voice.providers.chat import ChatConfig, TextDelta
from openab_voice.providers.chat_llama import (
    EXAMPLE_EXCHANGE,
    LlamaChat,
    _to_llama_messages,
    default_model_path,
    load_model,
)

WAKE = "Jarvis"
# One thread: greedy decoding is then the same on any machine (sums are not reordered across threads).
CONFIG = ChatConfig(temperature=0.0, seed=7, n_threads=1)
# Any "word:" or "two words:" at the start: a speaker label, the bot's name, a chat role.
LABEL = re.compile(r"^\s*[\w.'-]+(?: [\w.'-]+)?\s*:\s", re.UNICODE)
SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


@dataclass(frozen=True, slots=True)
class Answer:
    raw: str  # what the model wrote (until the sentence cap stopped it)
    spoken: list[str]  # what the voice would say
    ms: float

    @property
    def text(self) -> str:
        return " ".join(self.spoken)


@pytest.fixture(scope="module")
def chat() -> Iterator[LlamaChat]:
    llm = load_model(default_model_path(), CONFIG)
    provider = LlamaChat(CONFIG, llm=llm)
    yield provider
    llm.close()


def utterance(turn: int, text: str, *, speaker: str = "alice") -> UserUtterance:
    # As the conversation manager records an accepted turn: the wake name that addressed it removed.
    return UserUtterance(
        turn_id=f"t{turn}", speaker_id=speaker, speaker_name=speaker, text=without_address(text, WAKE), at=0.0
    )


async def ask(chat: LlamaChat, context: ShortTermContext, user: UserUtterance) -> Answer:
    """One answer through the engine's text path; stops the model at the sentence cap, as the
    response runner does."""
    names = sorted({e.user.speaker_name for e in context.exchanges} | {user.speaker_name})
    segmenter = SentenceSegmenter(labels=names, own_name=WAKE)
    raw: list[str] = []
    spoken: list[str] = []
    start = perf_ns()
    async with contextlib.aclosing(chat.stream(context.messages(user))) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                raw.append(event.text)
                spoken.extend(segmenter.push(event.text))
                if len(spoken) >= SMALL_MODEL_SENTENCES:
                    break
    if len(spoken) < SMALL_MODEL_SENTENCES:
        spoken.extend(segmenter.flush())
    answer = Answer(raw="".join(raw), spoken=spoken[:SMALL_MODEL_SENTENCES], ms=(perf_ns() - start) / 1e6)
    print(
        f"\n{user.speaker_name}: {user.text!r}\n  model: {answer.raw!r}\n  spoken: {answer.text!r}"
        f" ({answer.ms:.0f} ms)"
    )
    return answer


def assert_worth_hearing(answer: Answer, question: str) -> None:
    assert answer.spoken and answer.text.strip(), answer
    assert not LABEL.match(answer.raw), f"the model wrote a label: {answer.raw!r}"
    assert not any(LABEL.match(s) for s in answer.spoken), answer.spoken
    said, asked = name_tokens(answer.text), name_tokens(question)
    assert said != asked and said[: len(asked)] != asked, f"an echo of the question: {answer.text!r}"
    assert name_tokens(answer.text) != name_tokens(WAKE)
    assert len(answer.spoken) <= 2
    assert len(SENTENCE_END.findall(answer.text)) <= 2


def fresh() -> ShortTermContext:
    return ShortTermContext(system_prompt=SMALL_MODEL_PROMPT, max_turns=12, max_notes=20)


@pytest.mark.parametrize(
    ("question", "expect"),
    [
        ("Jarvis, what is the capital of France?", "paris"),
        ("What is two plus two?", "four"),
        ("Jarvis, tell me a short story about a friendly robot.", None),
        ("Hello, how are you?", None),
        ("What time is it?", None),  # no clock tool: the llama provider offers none
    ],
)
async def test_one_speaker_gets_a_short_real_answer(
    chat: LlamaChat, question: str, expect: str | None
) -> None:
    answer = await ask(chat, fresh(), utterance(1, question))
    assert_worth_hearing(answer, question)
    if expect is not None:
        assert expect in name_tokens(answer.text), answer.text


async def test_two_speakers_get_an_answer_without_labels(chat: LlamaChat) -> None:
    context = fresh()
    first = utterance(1, "Jarvis, what is the capital of France?")
    context.record_turn(first)
    context.record_heard("t1", "The capital of France is Paris.")
    question = "Jarvis, and what is the capital of Germany?"
    answer = await ask(chat, context, utterance(2, question, speaker="bob"))
    assert_worth_hearing(answer, question)
    assert "berlin" in name_tokens(answer.text), answer.text


def test_the_request_carries_no_label_for_the_model_to_copy() -> None:
    context = fresh()
    context.record_turn(utterance(1, "Jarvis, what is the capital of France?"))
    messages = context.messages(utterance(2, "Jarvis, and of Germany?", speaker="bob"))
    transcript_line = re.compile(rf"^\s*(?:alice|bob|{WAKE}|user|assistant)\s*:", re.I)
    contents = [m.content for m in messages]
    assert not any(transcript_line.match(c) for c in contents), contents
    assert not any(WAKE.lower() in c.lower() for c in contents), contents
    wire = _to_llama_messages(messages)
    # The example exchange sits between the system messages and the conversation.
    assert [m["role"] for m in wire] == ["system", "system", "user", "assistant", "user", "user"]
    assert tuple(wire[2:4]) == EXAMPLE_EXCHANGE


def test_a_long_history_is_trimmed_before_the_example(chat: LlamaChat) -> None:
    context = ShortTermContext(system_prompt=SMALL_MODEL_PROMPT, max_turns=200, max_notes=0)
    for i in range(60):
        context.record_turn(utterance(i, f"Tell me fact number {i} about the ocean and its tides, please."))
        context.record_heard(f"t{i}", f"Fact {i}: the ocean covers most of the planet and moves twice a day.")
    wire = _to_llama_messages(context.messages(utterance(99, "Thanks!")))
    fitted = chat._fit(wire)
    assert len(fitted) < len(wire)
    assert tuple(fitted[1:3]) == EXAMPLE_EXCHANGE  # kept, whole, right after the system prompt
    assert fitted[-1]["content"] == "Thanks!"
    assert fitted[3]["role"] == "user"  # history trimmed from its oldest turn
