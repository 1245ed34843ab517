"""A click that lands while the proposal is being delivered (posted, not yet pinned).

Discord's control channel posts the message with its buttons, then pins it in a second call, so the
operator can click in between. Delivered means posted AND pinned (ADR 0004, decision 4): a click may
never run an action whose pin then fails, and a proposal must not blow up because a click won.
Runs on SQLite and PostgreSQL with the scripted agent (a confirmed action really runs).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from openab_voice.actions.events import AgentProcessStarted
from openab_voice.actions.ports import CONFIRM, ProposalView
from openab_voice.actions.requests import Outcome
from openab_voice.clock import SystemClock
from openab_voice.jobs import JobStatus
from tests.fakes.actions import OPERATOR, CallLog, FakeControlChannel, PlaneRig, plane_rig, request

CLICK_SETTLE_S = 0.3  # long enough for an unguarded click to finish its store writes


def click_while_pinning(rig: PlaneRig) -> list[asyncio.Task[Outcome]]:
    """Make the operator click Confirm on the posted message before the pin call returns."""
    clicks: list[asyncio.Task[Outcome]] = []

    async def operator_clicks(view: ProposalView, message_id: int) -> None:
        clicks.append(
            asyncio.create_task(
                rig.broker.click(
                    decision=CONFIRM, action_id=view.action_id, user_id=OPERATOR, message_id=message_id
                )
            )
        )
        await asyncio.sleep(CLICK_SETTLE_S)  # real time: a window for an unguarded click to do harm

    rig.channel.after_post = operator_clicks
    return clicks


async def test_click_before_the_pin_fails_never_runs_the_withdrawn_proposal(
    db_url: str, tmp_path: Path
) -> None:
    channel = FakeControlChannel(CallLog(), fail_pin=True)
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), channel=channel) as rig:
        clicks = click_while_pinning(rig)

        proposal = await rig.broker.propose(request())
        [click] = await asyncio.gather(*clicks)
        await rig.executor.wait_idle()

        assert not proposal.ok and proposal.code == "ACTION_DELIVERY_FAILED"
        assert not click.ok, click
        [record] = rig.store.recent()
        assert record.status is JobStatus.DELIVERY_FAILED
        assert rig.published(AgentProcessStarted) == [], "an unpinned, withdrawn proposal ran"


async def test_click_before_the_pin_succeeds_leaves_a_consistent_action(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        clicks = click_while_pinning(rig)

        proposal = await rig.broker.propose(request())  # must not raise because the click won a race
        [click] = await asyncio.gather(*clicks)
        await rig.executor.wait_idle()

        assert proposal.ok, proposal
        [record] = rig.store.recent()
        assert record.proposal_message_id == rig.channel.message_ids[record.id]
        # Either the click was accepted once the proposal was delivered, or refused so the operator
        # clicks again: never a confirmed action whose proposal message nobody can close.
        if click.ok:
            assert record.status is JobStatus.SUCCEEDED
            assert len(rig.published(AgentProcessStarted)) == 1
            assert [c.data["message_id"] for c in rig.log.of("close_proposal")] == [
                record.proposal_message_id
            ]
        else:
            assert record.status is JobStatus.DELIVERED
            assert rig.published(AgentProcessStarted) == []


async def test_a_cancel_while_the_proposal_is_being_posted_stands(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        cancels: list[Outcome] = []

        async def operator_cancels(view: ProposalView, message_id: int) -> None:
            cancels.append(await rig.broker.cancel(view.action_id, user_id=OPERATOR))

        rig.channel.after_post = operator_cancels
        proposal = await rig.broker.propose(request())

        assert [c.ok for c in cancels] == [True]
        assert not proposal.ok and proposal.code == "ACTION_ALREADY_DECIDED"
        [record] = rig.store.recent()
        assert record.status is JobStatus.CANCELLED
        # The posted message loses its buttons: nobody can confirm a cancelled action from it.
        closed = rig.log.of("close_proposal")
        assert [c.data["message_id"] for c in closed] == [rig.channel.message_ids[record.id]]
