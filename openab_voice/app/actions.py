"""The action plane's long-lived parts that need no Discord: the migrated store, the workspaces and
the settings its broker and executor run with. The plane itself is built with the bot
(:mod:`openab_voice.app.bot`): its control channel posts through the Discord client."""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from openab_voice.acp.containment import Containment
from openab_voice.acp.pod import PodLauncher, PodSettings
from openab_voice.acp.sandbox import build_containment
from openab_voice.acp.workspace import WorkspaceManager
from openab_voice.actions.agents import AgentSettings
from openab_voice.actions.execution import workspace_root
from openab_voice.actions.leases import LOCAL_ROLE, LeaseSettings, default_node
from openab_voice.actions.requests import BrokerSettings
from openab_voice.clock import Clock
from openab_voice.config import Settings
from openab_voice.errors import AcpError, ConfigError, ErrorCode
from openab_voice.jobs import EffectCeiling
from openab_voice.settings.agent_env import parse_agent_env_entry
from openab_voice.shards import shard_range
from openab_voice.store.database import open_engine, resolve_url, upgrade
from openab_voice.store.jobs import JobStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionParts:
    """What :func:`build_action_parts` made. Whoever built it closes ``store``.

    Args:
        channel_id: the configured control text channel (None: where ``/voice join`` was used).
    """

    store: JobStore
    workspaces: WorkspaceManager
    broker: BrokerSettings
    agent: AgentSettings
    channel_id: int | None = None
    leases: LeaseSettings = field(default_factory=LeaseSettings)
    remote_poll_s: float | None = None  # executors are remote: deliver their results, start nothing


def build_action_parts(
    settings: Settings, *, clock: Clock, environ: Mapping[str, str] | None = None
) -> ActionParts | None:
    """The action plane's parts when ``OPENAB_ACTIONS_ENABLED``: migrates the store (SQLite file in the
    data directory by default), then settles broker and executor settings. None when actions are off.

    Args:
        environ: where allowlisted agent variables are read from (default: the process environment).

    Raises:
        StoreError: the database is unreachable or cannot be migrated.
        ConfigError: the configured agent sandbox cannot be used.
    """
    if not settings.actions_enabled:
        return None
    assert settings.operator_user_id is not None  # Settings validates this when actions are on
    url = resolve_url(settings)
    if settings.executor == "remote" and not url.startswith(("postgresql", "postgres")):
        raise ConfigError(
            "OPENAB_EXECUTOR=remote needs a PostgreSQL OPENAB_DATABASE_URL shared with the executors",
            setting="OPENAB_EXECUTOR",
            code=ErrorCode.CONFIG_EXECUTOR_NEEDS_POSTGRES,
        )
    upgrade(url)
    if settings.executor == "remote":
        # This bot starts no agent: the executors do, each refusing to start without containment.
        agent = agent_settings(settings, url=url, environ=environ, containment=Containment.remote())
    else:
        agent = agent_settings(settings, url=url, environ=environ)
    broker = broker_settings(settings, agent.containment)
    return ActionParts(
        # Opened last: nothing above can leave it open.
        store=JobStore(open_engine(url), clock),
        workspaces=WorkspaceManager(workspace_root(settings.data_dir), settings.workspace_repo, clock=clock),
        broker=broker,
        agent=agent,
        channel_id=settings.action_channel_id,
        leases=lease_settings(settings, role=LOCAL_ROLE),
        remote_poll_s=settings.executor_poll_s if settings.executor == "remote" else None,
    )


def broker_settings(settings: Settings, containment: Containment) -> BrokerSettings:
    """The broker's policy (``OPENAB_ACTION_*``, the shards) with what ``containment`` allows."""
    assert settings.operator_user_id is not None  # Settings validates this when actions are on
    return BrokerSettings(
        operator_user_id=settings.operator_user_id,
        expiry_s=settings.action_expiry_s,
        max_effect=EffectCeiling(settings.action_max_effect),
        exec_unavailable=containment.exec_unavailable,
        refusal=containment.refusal,
        containment_notice=containment.notice,
        containment=containment.describe(),
        shards=shard_range(settings),
    )


def agent_settings(
    settings: Settings,
    *,
    url: str,
    environ: Mapping[str, str] | None = None,
    pods: PodLauncher | None = None,
    containment: Containment | None = None,
) -> AgentSettings:
    """How agents are started here, and what contains them (:attr:`AgentSettings.containment`).

    Args:
        pods: The action pods' launcher (``OPENAB_ACP_SANDBOX=pod``: the dispatcher makes it).
        containment: Given, not probed (a remote-executor bot: its executors contain the agents).

    Raises:
        ConfigError: the configured containment cannot be used (``bwrap`` that cannot start, ``pod``
            without a launcher).
    """
    agent_environ = dict(os.environ if environ is None else environ)
    credentials = tuple(parse_agent_env_entry(entry) for entry in settings.acp_env)
    if containment is None:
        containment = _configured_containment(settings, url=url, environ=agent_environ, pods=pods)
    if containment.refusal is not None:
        log.error("actions are refused: %s", containment.refusal)
    elif containment.notice is not None:
        log.warning("%s", containment.notice)
    return AgentSettings(
        command=tuple(shlex.split(settings.acp_agent_command)),
        env_allowlist=settings.acp_env_allowlist,
        environ=agent_environ,
        turn_timeout_s=settings.acp_turn_timeout_s,
        cancel_grace_s=settings.acp_cancel_grace_s,
        trusted_listener_ids=frozenset(settings.trusted_listener_ids),
        credentials=credentials,
        auth_method=settings.acp_auth_method,
        containment=containment,
        pods=pods,
    )


def containment_for(settings: Settings, *, environ: Mapping[str, str] | None = None) -> Containment:
    """What would contain this process's agents, starting nothing but the bubblewrap probe
    (``check-config``). A remote-executor bot's agents run on the executors; a pod dispatcher's in
    pods it makes with its own service account (not tried here)."""
    if settings.executor == "remote":
        return Containment.remote()
    if settings.acp_sandbox == "pod":
        from openab_voice.acp.kube import default_namespace

        return Containment.pod(pod_settings(settings, namespace=default_namespace()))
    try:
        return _configured_containment(
            settings, url=resolve_url(settings), environ=dict(os.environ if environ is None else environ)
        )
    except ConfigError as exc:
        return Containment.unavailable(exc.message)


def _configured_containment(
    settings: Settings, *, url: str, environ: Mapping[str, str], pods: PodLauncher | None = None
) -> Containment:
    """The containment ``OPENAB_ACP_SANDBOX`` asks for here (bubblewrap is probed: one real start).

    Raises:
        ConfigError: ``bwrap`` that cannot start here, or ``pod`` without a launcher.
    """
    if settings.acp_sandbox == "pod":
        if pods is None:
            raise ConfigError(
                "OPENAB_ACP_SANDBOX=pod: action pods are made by `openab-voice executor`; run the bot with "
                "OPENAB_EXECUTOR=remote",
                setting="OPENAB_ACP_SANDBOX",
            )
        return Containment.pod(pods.settings)
    credentials = [parse_agent_env_entry(entry) for entry in settings.acp_env]
    try:
        return build_containment(
            settings.acp_sandbox,
            data_dir=settings.data_dir,
            environ=environ,
            # Hidden from the agent too: its own @file credentials and an SQLite store outside the data dir.
            hidden_files=[Path(source[1:]) for _, source in credentials if source.startswith("@")]
            + ([Path(url.removeprefix("sqlite:///"))] if url.startswith("sqlite:///") else []),
        )
    except AcpError as exc:
        raise ConfigError(exc.message, setting="OPENAB_ACP_SANDBOX", code=exc.code) from None


def pod_settings(settings: Settings, *, namespace: str | None) -> PodSettings:
    """The action pods' settings (``OPENAB_ACTION_POD_*``); ``namespace`` is the default namespace."""
    assert settings.action_pod_image is not None  # Settings validates it in pod mode
    return PodSettings(
        namespace=settings.action_pod_namespace or namespace or "default",
        image=settings.action_pod_image,
        agent_secret=settings.action_pod_agent_secret,
        service_account=settings.action_pod_service_account,
        cpu=settings.action_pod_cpu,
        memory=settings.action_pod_memory,
        workspace_size=settings.action_pod_workspace_size,
        storage_class=settings.action_pod_storage_class,
        start_timeout_s=settings.action_pod_start_timeout_s,
        # The cluster's own bound: the whole turn, the start and the cancel grace, with a margin.
        deadline_s=int(
            settings.acp_turn_timeout_s + settings.action_pod_start_timeout_s + settings.acp_cancel_grace_s
        )
        + 60,
    )


def lease_settings(settings: Settings, *, role: str) -> LeaseSettings:
    """The lease length, heartbeat and node name of a process of ``role`` (``local`` or ``executor``)."""
    return LeaseSettings(
        role=role,
        node=settings.node_id or default_node(),
        lease_s=settings.lease_s,
        heartbeat_s=settings.heartbeat_s,
    )
