"""Fakes for the action plane's Discord ports, and a rig that builds the plane on a real store.

:class:`FakeControlChannel` and :class:`FakeVoiceSide` implement the ``ControlChannel`` and
``VoiceSide`` Protocols of :mod:`openab_voice.actions.ports`. Both write every call into one shared
:class:`CallLog`, in the order the calls happened, so a test can assert e.g. that the result was
posted before anything was said. Switches make posting, pinning, result delivery or closing fail the
way the Discord implementation does (:class:`~openab_voice.errors.DeliveryFailed`).

:func:`plane_rig` builds the plane exactly as :mod:`openab_voice.actions.plane` is built by the app:
a migrated :class:`~openab_voice.store.jobs.JobStore`, a scratch
:class:`~openab_voice.acp.workspace.WorkspaceManager`, and the scripted ACP agent as a real subprocess.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from openab_voice.acp.containment import Containment
from openab_voice.acp.pod import PodLauncher
from openab_voice.acp.pod_workspace import PodWorkspaces
from openab_voice.acp.sandbox import Sandbox
from openab_voice.acp.spawn import live_members
from openab_voice.acp.types import Workspace
from openab_voice.acp.workspace import WorkspaceManager, Workspaces
from openab_voice.actions.agents import AgentSettings
from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.execution import ActionExecutor
from openab_voice.actions.leases import LeaseSettings
from openab_voice.actions.plane import ActionPlane
from openab_voice.actions.ports import Audience, ProposalView
from openab_voice.actions.requests import ActionRequest, BrokerSettings
from openab_voice.actions.tools import SessionFacts
from openab_voice.bus import Event, EventBus
from openab_voice.clock import Clock
from openab_voice.engine.expiry import SpeechCause
from openab_voice.errors import DeliveryFailed
from openab_voice.jobs import EffectCeiling
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.jobs import JobStore

E = TypeVar("E", bound=Event)

# Discord snowflakes exceed 2**31: the store must keep them whole.
GUILD = 1_234_567_890_123_456_789
TEXT_CHANNEL = 1_234_567_890_123_456_790
VOICE_CHANNEL = 1_234_567_890_123_456_791
OPERATOR = 111_222_333_444_555_666
STRANGER = 999_888_777_666_555_444
GENERATION = 7
VOICE_SESSION = "5e55100000aa"  # a voice session's random id
# The trusted facts a voice session hands the action tools and the task-phrase intake.
FACTS = SessionFacts(
    guild_id=GUILD,
    voice_channel_id=VOICE_CHANNEL,
    text_channel_id=TEXT_CHANNEL,
    generation=GENERATION,
    session_id=VOICE_SESSION,  # the voice session the fake voice side reports as live
)


@dataclass(frozen=True, slots=True)
class Call:
    """One call on a fake port: ``port`` is ``channel`` or ``voice``."""

    port: str
    name: str
    data: dict[str, Any]


class CallLog:
    """Every call on the fake ports, in order."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._grew = asyncio.Event()

    def record(self, port: str, name: str, **data: Any) -> None:
        self.calls.append(Call(port, name, data))
        self._grew.set()

    def names(self) -> list[str]:
        return [call.name for call in self.calls]

    def of(self, name: str) -> list[Call]:
        return [call for call in self.calls if call.name == name]

    def said(self) -> list[str]:
        """Everything the voice side was asked to say."""
        return [str(call.data["text"]) for call in self.of("say")]

    async def wait_for(self, name: str, *, count: int = 1, timeout_s: float = 20.0) -> list[Call]:
        """Wait until ``name`` was called ``count`` times."""
        async with asyncio.timeout(timeout_s):
            while len(self.of(name)) < count:
                self._grew.clear()
                await self._grew.wait()
        return self.of(name)


class FakeControlChannel:
    """The control text channel: posts, pins and closes proposals, posts results.

    Args:
        log: the shared call log.
        fail_post: ``post_proposal`` fails before anything is posted.
        fail_pin: the proposal is posted but pinning it fails (the broker must treat it as undelivered).
        fail_result: ``post_result`` fails.
        fail_close: ``close_proposal`` fails (best effort in the broker).

    Attributes:
        after_post: awaited between posting a proposal and pinning it (with the view and message id),
            where Discord's real implementation makes a second HTTP call: the message and its buttons
            are already visible, so the operator can click meanwhile.
    """

    def __init__(
        self,
        log: CallLog,
        *,
        fail_post: bool = False,
        fail_pin: bool = False,
        fail_result: bool = False,
        fail_close: bool = False,
    ) -> None:
        self.log = log
        self.fail_post = fail_post
        self.fail_pin = fail_pin
        self.fail_result = fail_result
        self.fail_close = fail_close
        self.message_ids: dict[str, int] = {}  # action id -> proposal message id
        self.after_post: Callable[[ProposalView, int], Awaitable[None]] | None = None
        self._ids = itertools.count(555_000_000_000_000_001)

    async def post_proposal(self, proposal: ProposalView) -> int:
        if self.fail_post:
            self.log.record("channel", "post_proposal", proposal=proposal, posted=False)
            raise DeliveryFailed("could not post the proposal (fake)")
        message_id = next(self._ids)
        self.log.record("channel", "post_proposal", proposal=proposal, posted=True, message_id=message_id)
        if self.after_post is not None:
            await self.after_post(proposal, message_id)
        if self.fail_pin:
            self.log.record("channel", "pin", message_id=message_id, pinned=False)
            raise DeliveryFailed("posted but could not pin the proposal (fake)")
        self.log.record("channel", "pin", message_id=message_id, pinned=True)
        self.message_ids[proposal.action_id] = message_id
        return message_id

    async def close_proposal(self, *, channel_id: int, message_id: int, note: str) -> None:
        self.log.record("channel", "close_proposal", channel_id=channel_id, message_id=message_id, note=note)
        if self.fail_close:
            raise DeliveryFailed("could not edit the proposal (fake)")

    async def post_result(self, *, channel_id: int, parts: Sequence[str], attachment: str | None) -> int:
        self.log.record(
            "channel",
            "post_result",
            channel_id=channel_id,
            parts=tuple(parts),
            attachment=attachment,
            delivered=not self.fail_result,
        )
        if self.fail_result:
            raise DeliveryFailed("could not post the result (fake)")
        return len(parts) + (attachment is not None)

    def proposals(self) -> list[ProposalView]:
        """Every proposal that was posted (pinned or not)."""
        return [c.data["proposal"] for c in self.log.of("post_proposal") if c.data["posted"]]

    def results(self) -> list[str]:
        """The text of every result that was delivered: its parts, then its attachment."""
        texts = []
        for call in self.log.of("post_result"):
            if call.data["delivered"]:
                texts.append("\n".join(call.data["parts"]) + "\n" + (call.data["attachment"] or ""))
        return texts

    def everything_posted(self) -> str:
        """Every character this channel was given, for leak checks."""
        return "\n".join(repr(call.data) for call in self.log.calls if call.port == "channel")


class FakeVoiceSide:
    """The voice side: the session generation and listeners the broker trusts, and speech.

    Attributes:
        current_generation: what ``generation`` answers for every guild (None: not connected).
        current_session: what ``session_id`` answers for every guild.
        present: what ``listeners`` answers for every guild (``audience`` too, with ``blind`` not viewing
            the control channel).
    """

    def __init__(
        self, log: CallLog, *, generation: int | None = GENERATION, listeners: frozenset[int] | None = None
    ) -> None:
        self.log = log
        self.current_generation = generation
        self.current_session: str | None = VOICE_SESSION
        self.present = frozenset({OPERATOR}) if listeners is None else listeners
        self.blind: frozenset[int] = frozenset()  # listeners who cannot view the control channel

    def generation(self, guild_id: int) -> int | None:
        return self.current_generation

    def session_id(self, guild_id: int) -> str | None:
        return self.current_session if self.current_generation is not None else None

    def listeners(self, guild_id: int) -> frozenset[int] | None:
        return self.present

    def audience(self, guild_id: int, control_channel_id: int) -> Audience | None:
        """Everyone present, viewing the control channel unless named in ``blind``."""
        if self.current_generation is None:
            return None
        return Audience(listeners=self.present, viewers=self.present - self.blind)

    async def say(self, guild_id: int, text: str, *, cause: SpeechCause | None = None) -> bool:
        self.log.record("voice", "say", guild_id=guild_id, text=text, cause=cause)
        return True

    async def announce(self, text: str, *, cause: SpeechCause | None = None) -> None:
        """The voice session's acknowledgment callable (what ``TaskPhraseIntake`` gets as ``say``);
        ``cause`` is recorded for the test to check."""
        self.log.record("voice", "say", guild_id=None, text=text, cause=cause)


# --- the plane on a real store and a real agent -------------------------------------------------


def agent_command(mode: str) -> tuple[str, ...]:
    """The scripted ACP agent in ``mode`` as a real subprocess."""
    return (sys.executable, "-m", "openab_voice.testing.acp_agent", "--mode", mode)


@dataclass
class PlaneRig:
    """An :class:`ActionPlane` on fakes and everything a test inspects around it."""

    plane: ActionPlane
    store: JobStore
    workspaces: Workspaces
    channel: FakeControlChannel
    voice: FakeVoiceSide
    log: CallLog
    bus: EventBus
    clock: Clock
    events: list[Event] = field(default_factory=list)

    @property
    def broker(self) -> ActionBroker:
        return self.plane.broker

    @property
    def executor(self) -> ActionExecutor:
        return self.plane.executor

    def published(self, kind: type[E]) -> list[E]:
        return [event for event in self.events if isinstance(event, kind)]

    async def until_published(self, kind: type[E], action_id: str, *, timeout_s: float = 20.0) -> E:
        """The first ``kind`` event of ``action_id``, once it is published (woken by the bus)."""
        arrived = asyncio.Event()
        subscription = self.bus.subscribe(kind, lambda _event: arrived.set())
        try:
            async with asyncio.timeout(timeout_s):
                while not (
                    found := [e for e in self.published(kind) if getattr(e, "action_id", None) == action_id]
                ):
                    arrived.clear()
                    await arrived.wait()
        except TimeoutError:
            raise AssertionError(f"no {kind.__name__} for {action_id} within {timeout_s} s") from None
        finally:
            subscription.close()
        return found[0]

    def workspace(self, action_id: str) -> Workspace:
        return self.workspaces.locate(action_id)


async def propose_and_confirm(
    rig: PlaneRig, goal: str = "write a haiku about the sea", call_id: str | None = None
) -> str:
    """Propose ``goal`` as the operator and click its Confirm; the action's id."""
    outcome = await rig.broker.propose(request(goal, call_id=call_id or f"turn-1:{goal}"))
    assert outcome.ok and outcome.action is not None, outcome
    clicked = await rig.broker.click(
        decision="confirm",
        action_id=outcome.action.id,
        user_id=OPERATOR,
        message_id=rig.channel.message_ids[outcome.action.id],
    )
    assert clicked.ok, clicked
    return outcome.action.id


def request(
    goal: str = "write a haiku about the sea",
    *,
    speaker: int | None = OPERATOR,
    call_id: str = "turn-1:call-1",
    generation: int = GENERATION,
    voice_session: str = VOICE_SESSION,
    source: str = "tool",
    effect: EffectCeiling = EffectCeiling.WORKSPACE_WRITE,
) -> ActionRequest:
    """A request as the voice session would build it (trusted facts from the fakes' constants)."""
    return ActionRequest(
        goal=goal,
        effect_hint=effect,
        call_id=call_id,
        source=source,
        guild_id=GUILD,
        voice_channel_id=VOICE_CHANNEL,
        text_channel_id=TEXT_CHANNEL,
        session_generation=generation,
        voice_session_id=voice_session,
        speaker_id=speaker,
    )


@asynccontextmanager
async def plane_rig(
    url: str,
    root: Path,
    *,
    clock: Clock,
    mode: str = "normal",
    channel: FakeControlChannel | None = None,
    listeners: frozenset[int] | None = None,
    trusted: frozenset[int] = frozenset(),
    environ: dict[str, str] | None = None,
    env_allowlist: tuple[str, ...] = (),
    credentials: tuple[tuple[str, str], ...] = (),
    auth_method: str | None = None,
    sandbox: Sandbox | None = None,
    pods: PodLauncher | None = None,
    command: tuple[str, ...] | None = None,
    max_effect: EffectCeiling | None = None,
    turn_timeout_s: float = 5.0,
    cancel_grace_s: float = 0.5,
    expiry_s: float = 300.0,
    log: CallLog | None = None,
    repo: Path | None = None,
    git: str = "git",
    store_class: type[JobStore] = JobStore,
    leases: LeaseSettings | None = None,
    remote_poll_s: float | None = None,
) -> AsyncIterator[PlaneRig]:
    """The plane as the app builds it, on fakes; closed (plane, then store) on exit.

    ``repo`` makes every workspace a git worktree of it (one shared workspace id); ``git`` is the
    git executable the workspace manager runs; ``store_class`` may be a gated store
    (``tests/fakes/gates.py``); ``command`` replaces the scripted agent (a third-party agent);
    ``leases`` names the plane's lease owner (role, node) and times; ``remote_poll_s`` makes the
    executors remote (``OPENAB_EXECUTOR=remote``: the plane queues and delivers, never spawns).
    """
    log = log if log is not None else (channel.log if channel is not None else CallLog())
    channel = channel if channel is not None else FakeControlChannel(log)
    voice = FakeVoiceSide(log, listeners=listeners)
    upgrade(url)
    store = store_class(open_engine(url), clock)
    workspaces: Workspaces = (
        WorkspaceManager(root / "ws", repo, clock=clock, git=git)
        if pods is None
        else PodWorkspaces(pods.api, pods.settings, root / "ws", clock=clock)
    )
    contained = sandbox is not None or pods is not None
    bus = EventBus()
    plane = ActionPlane(
        store=store,
        workspaces=workspaces,
        broker=BrokerSettings(
            operator_user_id=OPERATOR,
            expiry_s=expiry_s,
            # Commands (workspace_exec) only where a test gives the agent a sandbox.
            max_effect=max_effect
            or (EffectCeiling.WORKSPACE_EXEC if contained else EffectCeiling.WORKSPACE_WRITE),
            exec_unavailable=None if contained else "no agent sandbox in this test",
        ),
        agent=AgentSettings(
            command=command or agent_command(mode),
            env_allowlist=env_allowlist,
            environ=environ or {},
            turn_timeout_s=turn_timeout_s,
            cancel_grace_s=cancel_grace_s,
            trusted_listener_ids=trusted,
            credentials=credentials,
            auth_method=auth_method,
            # A test without a sandbox runs the scripted agent uncontained, as OPENAB_ACP_SANDBOX=off would.
            containment=(
                Containment.pod(pods.settings)
                if pods is not None
                else Containment.bwrap(sandbox)
                if sandbox is not None
                else Containment.off("no agent sandbox in this test")
            ),
            pods=pods,
        ),
        channel=channel,
        voice=voice,
        bus=bus,
        clock=clock,
        leases=leases,
        remote_poll_s=remote_poll_s,
    )
    rig = PlaneRig(
        plane=plane,
        store=store,
        workspaces=workspaces,
        channel=channel,
        voice=voice,
        log=log,
        bus=bus,
        clock=clock,
    )
    bus.subscribe(Event, rig.events.append)
    try:
        yield rig
    finally:
        try:
            await plane.aclose()
        finally:
            store.close()


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in process group ``pgid``."""
    return bool(live_members(pgid))


def alive(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return state[state.rfind(")") + 2] != "Z"
