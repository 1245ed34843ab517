"""Result text for Discord (split under the message limit, a file beyond a few parts), the spoken
status, and the deterministic task phrase. Pure functions: no store, so no database parameter."""

from __future__ import annotations

import pytest

from openab_voice.acp.types import PermissionDecision
from openab_voice.actions.phrases import task_goal
from openab_voice.actions.results import (
    MAX_PARTS,
    MESSAGE_LIMIT,
    headline,
    refusals,
    result_text,
    spoken_status,
)
from openab_voice.jobs import EffectCeiling

GOAL = "summarise the build log"


def full_text(output: str, *, action_id: str = "a-1", execution: str = "succeeded") -> str:
    return "\n".join([headline(action_id, execution), f"Goal: {GOAL}", "Agent output:\n" + output])


def lines(count: int) -> str:
    return "\n".join(f"{i:04d} " + "x" * 94 for i in range(count))  # 99 characters a line


def test_short_result_is_one_message_with_headline_goal_and_output() -> None:
    text = result_text(action_id="a-1", goal=GOAL, execution="succeeded", output="  all green\n")
    assert text.attachment is None
    assert text.parts == ("Action `a-1` succeeded.\nGoal: summarise the build log\nAgent output:\nall green",)


def test_detail_and_missing_output_are_shown() -> None:
    text = result_text(
        action_id="a-1", goal=GOAL, execution="outcome_unknown", output="", detail="agent exited"
    )
    [part] = text.parts
    assert "UNKNOWN" in part and "quarantined" in part
    assert "Detail: agent exited" in part and part.endswith("Agent output:\n(no output)")


def test_long_result_is_split_under_the_limit_at_line_ends_and_numbered() -> None:
    output = lines(50)  # about 5,000 characters: three parts
    text = result_text(action_id="a-1", goal=GOAL, execution="succeeded", output=output)

    assert text.attachment is None
    assert 1 < len(text.parts) <= MAX_PARTS
    n = len(text.parts)
    bodies = []
    for i, part in enumerate(text.parts, 1):
        assert len(part) < MESSAGE_LIMIT
        body, marker = part.rsplit("\n", 1)
        assert marker == f"({i}/{n})"
        bodies.append(body)
    assert "\n".join(bodies) == full_text(output), "cut at line ends, nothing lost"


def test_a_single_long_line_is_cut_hard() -> None:
    output = "y" * 4500
    text = result_text(action_id="a-1", goal=GOAL, execution="succeeded", output=output)

    assert all(len(part) < MESSAGE_LIMIT for part in text.parts)
    bodies = [part.rsplit("\n", 1)[0] for part in text.parts]
    assert "y" * 4500 in "".join(bodies).replace("\n", "")


def test_beyond_four_parts_the_full_text_is_attached() -> None:
    # Grow the output line by line: the last size that fits in MAX_PARTS messages, then one more line.
    count = 1
    while (
        result_text(action_id="a-1", goal=GOAL, execution="succeeded", output=lines(count)).attachment is None
    ):
        count += 1
    fits = result_text(action_id="a-1", goal=GOAL, execution="succeeded", output=lines(count - 1))
    overflows = result_text(action_id="a-1", goal=GOAL, execution="succeeded", output=lines(count))

    assert len(fits.parts) == MAX_PARTS and all(len(p) < MESSAGE_LIMIT for p in fits.parts)
    [head] = overflows.parts
    assert len(head) < MESSAGE_LIMIT and head.endswith("(full output attached)")
    assert head.startswith("Action `a-1` succeeded.\nGoal: summarise the build log")
    assert overflows.attachment == full_text(lines(count))


def test_spoken_status_is_the_status_unless_every_listener_is_trusted() -> None:
    output = "**All 12 tests pass.** Thanks <@123456789012345678>\nsecond line with details"
    assert spoken_status(execution="succeeded", output=output, all_trusted=False) == (
        "The task is done. The result is in the text channel."
    )
    summary = spoken_status(execution="succeeded", output=output, all_trusted=True)
    assert summary.startswith("The task is done. All 12 tests pass.")
    assert "**" not in summary and "<@" not in summary and "second line" not in summary
    assert summary.endswith("The full result is in the text channel.")
    assert len(spoken_status(execution="succeeded", output="z " * 500, all_trusted=True)) < 300


@pytest.mark.parametrize(
    ("execution", "output", "speech"),
    [
        ("failed", "secret stack trace", "The task failed. The result is in the text channel."),
        ("cancelled", "partial work", "The task was cancelled. The result is in the text channel."),
        (
            "outcome_unknown",
            "partial work",
            "The task ended without a known outcome. The result is in the text channel.",
        ),
        ("succeeded", "   ", "The task is done. The result is in the text channel."),
    ],
)
def test_trusted_rooms_hear_only_the_status_of_anything_but_a_success(
    execution: str, output: str, speech: str
) -> None:
    assert spoken_status(execution=execution, output=output, all_trusted=True) == speech


@pytest.mark.parametrize(
    ("text", "wake_name", "goal"),
    [
        ("Start a task: write the release notes.", None, "write the release notes."),
        ("start a task write a haiku", None, "write a haiku"),
        ("START A TASK, fix the build!", "Jarvis", "fix the build!"),
        ("Jarvis, please start a task to fix the build", "Jarvis", "to fix the build"),
        ("Hey Jarvis, start a task: tidy the README", "Jarvis", "tidy the README"),
        ("Novo, start a task: tidy the README", "Nova", "tidy the README"),  # one letter misheard
        ("Um, so, okay, start a task: run the tests", None, "run the tests"),
        ("please start a task — update the changelog", None, "update the changelog"),
        # What tiny.en made of the phrase on the demo's lossy audio: same request.
        ("Jarvis started task, add a short readme file", "Jarvis", "add a short readme file"),
        ("please start the task: run it", None, "run it"),
    ],
)
def test_task_phrase_yields_the_rest_of_the_utterance(text: str, wake_name: str | None, goal: str) -> None:
    assert task_goal(text, wake_name=wake_name) == goal


@pytest.mark.parametrize(
    ("text", "wake_name"),
    [
        ("could you start a task", None),
        ("could you start a task to fix the build", "Jarvis"),
        ("we should not start a task now", "Jarvis"),
        ("Jarvis, start a task: run it", None),  # a name, but no wake name configured
        ("Bob, start a task: run it", "Jarvis"),  # someone else's name
        ("start a task", None),
        ("Start a task.", "Jarvis"),
        ("start a task: ...", None),
        ("I started a task yesterday", "Jarvis"),
        ("Sorry to task, add a file", "Jarvis"),
        ("start a tasking session", None),
        ("yes", "Jarvis"),
        ("I approve", "Jarvis"),
        ("confirm the task", "Jarvis"),
        ("", None),
    ],
)
def test_not_a_task_phrase(text: str, wake_name: str | None) -> None:
    assert task_goal(text, wake_name=wake_name) is None


def decision(kind: str, needed: EffectCeiling, option: str | None) -> PermissionDecision:
    return PermissionDecision(
        tool_call_id=f"call-{kind}",
        title=f"{kind} something",
        kind=kind,
        needed=needed,
        offered=("allow_once", "reject_once"),
        outcome="selected" if option else "cancelled",
        option_id=f"opt-{option}" if option else None,
        option_kind=option,  # type: ignore[arg-type]
        reason=f"{needed.value} vs the ceiling",
    )


ALLOWED = decision("edit", EffectCeiling.WORKSPACE_WRITE, "allow_once")
REFUSED = decision("execute", EffectCeiling.EXTERNAL, "reject_once")
NO_CHOICE = decision("fetch", EffectCeiling.EXTERNAL, None)


def test_a_success_with_a_refused_request_says_so_in_text_and_voice() -> None:
    refused = refusals([ALLOWED, REFUSED], "workspace_write")
    [part] = result_text(
        action_id="a-1", goal=GOAL, execution="succeeded", output="ok", refused=refused
    ).parts

    assert part.startswith(
        "Action `a-1` succeeded, but 1 of its 2 permission requests was refused (ceiling workspace_write)."
    )
    assert "Refused: 'execute something' (execute, needs external)" in part
    speech = spoken_status(execution="succeeded", output="ok", all_trusted=True, refused=refused)
    assert speech.startswith("The task is done, but 1 of its 2 permission requests was refused.")
    assert "ok" not in speech.split(".")[1], "no summary read aloud over a refusal"


def test_a_turn_whose_every_request_was_refused_is_not_a_plain_done() -> None:
    refused = refusals([REFUSED, NO_CHOICE], "read_only")
    [part] = result_text(action_id="a-1", goal=GOAL, execution="succeeded", output="", refused=refused).parts
    speech = spoken_status(execution="succeeded", output="", all_trusted=False, refused=refused)

    assert "succeeded" not in part.splitlines()[0]
    assert "all 2 of its permission requests were refused under the read_only ceiling" in part
    assert part.count("Refused: ") == 2
    assert "done" not in speech and "all 2 of its permission requests were refused" in speech
    single = spoken_status(
        execution="succeeded", output="", all_trusted=False, refused=refusals([REFUSED], "read_only")
    )
    assert single.startswith("The task ended, but its permission request was refused")


def test_no_refusal_keeps_the_plain_status() -> None:
    refused = refusals([ALLOWED], "workspace_write")
    assert not refused.any
    assert spoken_status(execution="succeeded", output="", all_trusted=False, refused=refused) == (
        "The task is done. The result is in the text channel."
    )
    assert headline("a-1", "succeeded", refused) == "Action `a-1` succeeded."
