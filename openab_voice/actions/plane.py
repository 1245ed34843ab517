"""The action plane as one unit the bot owns: store, broker, executor, bound to Discord late.

The broker needs the control channel and the voice side, which exist only once the discord.py client
does; :meth:`ActionPlane.bind` is called by the bot's constructor with both.
"""

from __future__ import annotations

from openab_voice.acp.workspace import WorkspaceManager
from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.execution import ActionExecutor, AgentSettings
from openab_voice.actions.ports import ControlChannel, VoiceSide
from openab_voice.actions.requests import BrokerSettings
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.jobs import JobStatus
from openab_voice.store.jobs import JobStore


class ActionPlane:
    """Owns the broker and the executor of this process.

    Args:
        channel_id: the configured control text channel (None: where ``/voice join`` was used).
    """

    def __init__(
        self,
        *,
        store: JobStore,
        workspaces: WorkspaceManager,
        broker: BrokerSettings,
        agent: AgentSettings,
        bus: EventBus,
        clock: Clock,
        channel_id: int | None = None,
    ) -> None:
        self.store = store
        self.channel_id = channel_id
        self._workspaces = workspaces
        self._broker_settings = broker
        self._agent = agent
        self._bus = bus
        self._clock = clock
        self._broker: ActionBroker | None = None
        self._executor: ActionExecutor | None = None

    def bind(self, *, channel: ControlChannel, voice: VoiceSide) -> None:
        """Create the executor and broker on the bot's Discord ports. Once."""
        if self._broker is not None:
            raise RuntimeError("the action plane is already bound")
        self._executor = ActionExecutor(
            store=self.store,
            workspaces=self._workspaces,
            channel=channel,
            voice=voice,
            agent=self._agent,
            bus=self._bus,
            clock=self._clock,
        )
        self._broker = ActionBroker(
            store=self.store,
            channel=channel,
            voice=voice,
            settings=self._broker_settings,
            bus=self._bus,
            clock=self._clock,
            on_confirmed=self._executor.launch,
            on_cancel=self._executor.cancel,
            on_reconcile=self._executor.lift_quarantine,
        )

    @property
    def broker(self) -> ActionBroker:
        if self._broker is None:
            raise RuntimeError("the action plane is not bound to a bot yet")
        return self._broker

    @property
    def executor(self) -> ActionExecutor:
        if self._executor is None:
            raise RuntimeError("the action plane is not bound to a bot yet")
        return self._executor

    async def start(self) -> None:
        """Restart reconciliation (running → outcome_unknown, its workspace quarantined in the store and
        on disk, never re-run), then the expiry sweeper."""
        for record in await self.broker.start():
            if record.status is JobStatus.OUTCOME_UNKNOWN:
                workspace = self._workspaces.locate(record.id)
                if workspace.private.is_dir():
                    self._workspaces.quarantine(workspace, "process restarted while the action was running")

    async def aclose(self) -> None:
        if self._broker is not None:
            await self._broker.aclose()
        if self._executor is not None:
            await self._executor.aclose()
