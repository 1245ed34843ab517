"""What contains an agent here, decided once at start-up, and refused when nothing does.

Three ways to contain an agent (docs/adr/0007, docs/adr/0016):

- ``bwrap``: a bubblewrap sandbox around a local process (the embedded default);
- ``pod``: a fresh Kubernetes pod per action, created by the dispatcher (``openab-voice executor``
  with ``OPENAB_ACP_SANDBOX=pod``), holding only the agent, its own credentials and its workspace;
- ``off``: nothing, and only because the operator said so (``OPENAB_ACP_SANDBOX=off``); every
  proposal says it.

When the configured kind cannot work here (``auto`` or ``bwrap`` where bubblewrap cannot start), the
result is ``unavailable``: actions are refused with the reason, at start-up (``check-config``,
``/voice status``) and on every proposal. There is no silent fallback to an uncontained agent: an
agent that runs as the process holding the database URL can confirm its own proposals.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openab_voice.acp.pod import PodSettings
    from openab_voice.acp.sandbox import Sandbox


class ContainmentMode(StrEnum):
    """How agents are contained. Values appear in ``check-config`` and ``/voice status``."""

    BWRAP = "bwrap"
    POD = "pod"
    OFF = "off"
    UNAVAILABLE = "unavailable"
    # A bot with OPENAB_EXECUTOR=remote runs no agent: the executors do, and each of them refuses to
    # start without containment of its own (and a command ceiling without a sandbox fails there).
    REMOTE = "remote"


@dataclass(frozen=True, slots=True, kw_only=True)
class Containment:
    """The containment every agent of this process runs in.

    Attributes:
        mode: Which kind.
        reason: One line for people: what contains the agents, or why nothing can.
        sandbox: The bubblewrap sandbox (``bwrap`` only).
        pods: Where and how action pods are made (``pod`` only).
    """

    mode: ContainmentMode
    reason: str
    sandbox: Sandbox | None = None
    pods: PodSettings | None = None

    def __post_init__(self) -> None:
        if (self.mode is ContainmentMode.BWRAP) != (self.sandbox is not None):
            raise ValueError("a bwrap containment needs its sandbox, and only it has one")
        if (self.mode is ContainmentMode.POD) != (self.pods is not None):
            raise ValueError("a pod containment needs its pod settings, and only it has them")

    @classmethod
    def bwrap(cls, sandbox: Sandbox) -> Containment:
        return cls(
            mode=ContainmentMode.BWRAP,
            reason="every agent runs in a bubblewrap sandbox (its workspace the only writable path)",
            sandbox=sandbox,
        )

    @classmethod
    def pod(cls, pods: PodSettings) -> Containment:
        return cls(
            mode=ContainmentMode.POD,
            reason=f"every agent runs in a fresh pod of its own in namespace {pods.namespace}",
            pods=pods,
        )

    @classmethod
    def off(cls, reason: str = "the agent sandbox is off (OPENAB_ACP_SANDBOX=off)") -> Containment:
        return cls(mode=ContainmentMode.OFF, reason=reason)

    @classmethod
    def remote(cls) -> Containment:
        return cls(
            mode=ContainmentMode.REMOTE,
            reason="agents run on the executors (openab-voice executor), each contained there",
        )

    @classmethod
    def unavailable(cls, why: str) -> Containment:
        return cls(mode=ContainmentMode.UNAVAILABLE, reason=why)

    @property
    def refusal(self) -> str | None:
        """Why every action is refused here, or None when agents can run."""
        if self.mode is ContainmentMode.UNAVAILABLE:
            return (
                f"no agent containment is available: {self.reason} "
                "(set OPENAB_ACP_SANDBOX=off only if agents may run uncontained)"
            )
        return None

    @property
    def notice(self) -> str | None:
        """What every proposal must say about containment (None: nothing to warn about)."""
        if self.mode is ContainmentMode.OFF:
            return (
                "the agent runs WITHOUT containment (OPENAB_ACP_SANDBOX=off): it can read whatever "
                "this bot's user can"
            )
        return None

    @property
    def contained(self) -> bool:
        """Whether agents run inside a sandbox or a pod (what ``workspace_exec`` needs)."""
        return self.mode in (ContainmentMode.BWRAP, ContainmentMode.POD, ContainmentMode.REMOTE)

    @property
    def exec_unavailable(self) -> str | None:
        """Why commands (``workspace_exec``) cannot be granted, or None when they can."""
        return None if self.contained else self.reason

    def describe(self) -> str:
        """One line for ``check-config`` and ``/voice status``."""
        if self.mode is ContainmentMode.UNAVAILABLE:
            return f"actions refused: {self.refusal}"
        return f"{self.mode.value}: {self.reason}"
