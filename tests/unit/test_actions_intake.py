"""The task phrase from final transcripts: speech can propose, never approve.

Runs on SQLite and PostgreSQL, with the plane's real broker and executor (so an agent *could* run
if speech were wrongly taken as a confirmation; the tests prove none does).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

from openab_voice.actions.events import ActionRequestRefused, AgentProcessStarted
from openab_voice.actions.intake import ACK_PROPOSED, ACK_REFUSED, TaskPhraseIntake
from openab_voice.clock import SystemClock
from openab_voice.jobs import JobStatus
from openab_voice.stt.events import TranscriptFinal
from tests.fakes.actions import (
    FACTS,
    OPERATOR,
    STRANGER,
    PlaneRig,
    plane_rig,
    request,
)

SESSION = "voice-session-1"
_UTTERANCES: Iterator[int] = itertools.count(1)


@asynccontextmanager
async def session(db_url: str, tmp_path: Path) -> AsyncIterator[tuple[PlaneRig, TaskPhraseIntake]]:
    """A plane plus the intake a voice session would start; the intake is closed (its proposals
    finished) before the test's assertions that follow ``settle``."""
    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        intake = TaskPhraseIntake(
            broker=rig.broker,
            bus=rig.bus,
            facts=FACTS,
            wake_name=lambda: "Jarvis",
            say=rig.voice.announce,
        )
        try:
            yield rig, intake
        finally:
            await intake.aclose()


def hear(
    rig: PlaneRig, intake: TaskPhraseIntake, text: str, *, speaker: str = str(OPERATOR), utterance: str = ""
) -> bool:
    """The session's desk offering a final to the intake; whether it took it."""
    return intake.offer(
        TranscriptFinal(
            at=rig.clock.monotonic(),
            session_id=SESSION,
            speaker_id=speaker,
            utterance_id=utterance or f"utt-{next(_UTTERANCES)}",
            text=text,
            audio_start=0.0,
            audio_end=1.0,
            partials=0,
        )
    )


async def test_spoken_approval_confirms_nothing(db_url: str, tmp_path: Path) -> None:
    async with session(db_url, tmp_path) as (rig, intake):
        outcome = await rig.broker.propose(request(call_id="t1:c1"))
        assert outcome.action is not None
        action_id = outcome.action.id
        before = rig.store.require(action_id)
        calls_before = list(rig.log.calls)

        for said in (
            "yes",
            "I approve",
            "confirm the task",
            "Jarvis, yes, confirm it",
            f"approve {action_id}",
        ):
            assert not intake.claims(said)
            assert not hear(rig, intake, said)
        await intake.aclose()

        assert rig.store.require(action_id) == before
        assert rig.store.require(action_id).status is JobStatus.DELIVERED
        assert len(rig.store.transitions(action_id)) == 2
        assert rig.log.calls == calls_before, "nothing posted, closed or said"
        assert rig.published(AgentProcessStarted) == [] and rig.executor.running == []
        assert not rig.workspace(action_id).private.parent.exists()
        assert len(rig.store.recent()) == 1


async def test_operator_task_phrase_proposes_exactly_one_action(db_url: str, tmp_path: Path) -> None:
    async with session(db_url, tmp_path) as (rig, intake):
        assert intake.claims("Start a task: write a haiku")
        assert hear(rig, intake, "Start a task: write a haiku", utterance="utt-haiku")
        await rig.log.wait_for("say")
        assert hear(rig, intake, "Start a task: write a haiku", utterance="utt-haiku")  # the same again
        await intake.aclose()

        [record] = rig.store.recent()
        assert (record.goal, record.status, record.proposed_by) == (
            "write a haiku",
            JobStatus.DELIVERED,
            OPERATOR,
        )
        assert record.idempotency_key is not None and record.idempotency_key.startswith("phrase:")
        [view] = rig.channel.proposals()
        assert (view.action_id, view.goal, view.source) == (record.id, "write a haiku", "phrase")
        # Acknowledged after the proposal was posted; it waits for the click, nothing runs.
        assert rig.log.names()[:3] == ["post_proposal", "pin", "say"]
        assert set(rig.log.said()) == {ACK_PROPOSED}
        assert rig.published(AgentProcessStarted) == [] and rig.executor.running == []


async def test_task_phrase_from_anyone_but_the_operator_proposes_nothing(db_url: str, tmp_path: Path) -> None:
    async with session(db_url, tmp_path) as (rig, intake):
        assert hear(rig, intake, "Start a task: write a haiku", speaker=str(STRANGER))
        await intake.aclose()

        assert rig.store.recent() == []
        assert rig.channel.proposals() == []
        [refused] = rig.store.audit_entries(kind="request_refused")
        assert (refused.actor, refused.detail["code"], refused.detail["source"]) == (
            str(STRANGER),
            "ACTION_NOT_OPERATOR",
            "phrase",
        )
        assert rig.log.said() == [ACK_REFUSED["ACTION_NOT_OPERATOR"]]


async def test_unattributed_speech_proposes_nothing(db_url: str, tmp_path: Path) -> None:
    async with session(db_url, tmp_path) as (rig, intake):
        hear(rig, intake, "Start a task: write a haiku", speaker="unattributed")
        hear(rig, intake, "Start a task: write a haiku", speaker="ssrc-4242")
        await intake.aclose()

        assert rig.store.recent() == [] and rig.log.calls == []
        codes = [e.detail["code"] for e in rig.store.audit_entries(kind="request_refused")]
        assert codes == ["ACTION_UNATTRIBUTED", "ACTION_UNATTRIBUTED"]
        assert [e.code for e in rig.published(ActionRequestRefused)] == codes
