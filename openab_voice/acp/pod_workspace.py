"""Workspaces of action pods: one PersistentVolumeClaim per action, mounted only into its pod.

The working tree is the claim (``/workspace`` in the pod); what is ours stays on the dispatcher's
disk, as for a local workspace: the agent's stderr log and the quarantine marker
(``<root>/<action id>/private``). The agent's throwaway ``HOME`` and ``TMPDIR`` are the pod's own
``emptyDir``: they go with the pod. A quarantined claim outlives its pod, untouched, for the operator
to inspect (``kubectl -n <ns> get pvc -l openab.dev/action-id=<id>``); every other claim is deleted
once its action settled (the result is in the text channel). docs/adr/0016 says why a claim and not
a pod's ``emptyDir``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from openab_voice.acp.pod import WORKSPACE_MOUNT, PodApi, PodSettings, claim_manifest, claim_name
from openab_voice.acp.types import Workspace
from openab_voice.acp.workspace import WorkspaceManager, make_action_dir, remove_tree
from openab_voice.clock import Clock
from openab_voice.errors import AcpError, ErrorCode


class PodWorkspaces:
    """:class:`~openab_voice.acp.workspace.Workspaces` on volume claims (``OPENAB_ACP_SANDBOX=pod``)."""

    def __init__(self, api: PodApi, settings: PodSettings, root: Path, *, clock: Clock) -> None:
        self._api = api
        self._settings = settings
        self._root = Path(os.path.abspath(root))
        # The marker logic is the local one: the same file, read the same way, fails closed the same way.
        self._markers = WorkspaceManager(root, clock=clock)

    def workspace_id(self, action_id: str) -> str:
        return f"pvc:{self._api.namespace}/{claim_name(action_id)}"

    def locate(self, action_id: str) -> Workspace:
        local = self._markers.locate(action_id)
        return Workspace(
            id=self.workspace_id(action_id), action_id=action_id, path=WORKSPACE_MOUNT, private=local.private
        )

    async def prepare(self, action_id: str) -> Workspace:
        """Create the action's private folder here and its claim in the cluster (never reused).

        Raises:
            AcpError: ``ACP_WORKSPACE_EXISTS`` when the action already had one, ``ACP_POD_FAILED`` when
                the claim is refused.
        """
        ws = self.locate(action_id)
        make_action_dir(self._root, ws.private.parent)
        try:
            ws.private.mkdir(mode=0o700)
            ws.logs.mkdir(mode=0o700)
            await self._api.create(claim_manifest(action_id, self._settings))
        except BaseException:
            await asyncio.to_thread(remove_tree, ws.private.parent)
            raise
        return ws

    def quarantine(self, workspace: Workspace, reason: str) -> None:
        self._markers.quarantine(workspace, reason)

    def quarantine_reason(self, workspace: Workspace) -> str | None:
        return self._markers.quarantine_reason(workspace)

    def release(self, workspace: Workspace) -> None:
        self._markers.release(workspace)

    async def discard_scratch(self, workspace: Workspace) -> None:
        """Nothing here: the agent's HOME and TMPDIR were its pod's ``emptyDir``, gone with the pod."""

    async def finished(self, workspace: Workspace) -> None:
        """Delete the claim: the result went to text, and a cluster's disks are not a folder to browse.

        A quarantined claim never comes here; it stays until the operator reconciled it and deletes it
        (``kubectl delete pvc``).
        """
        await self._api.delete_claim(claim_name(workspace.action_id))

    async def cleanup(self, workspace: Workspace) -> None:
        """Delete the claim and the private folder (a workspace that was prepared and never used).

        Raises:
            AcpError: ``ACP_WORKSPACE_QUARANTINED`` while it is quarantined.
        """
        reason = self.quarantine_reason(workspace)
        if reason is not None:
            raise AcpError(
                f"workspace of action {workspace.action_id} is quarantined: {reason}",
                code=ErrorCode.ACP_WORKSPACE_QUARANTINED,
            )
        await self._api.delete_claim(claim_name(workspace.action_id))
        await asyncio.to_thread(remove_tree, workspace.private.parent)
