"""The action plane's settings: the voice model's tools, actions and their agent, executors and leases
(env names in :mod:`openab_voice.settings.names`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from openab_voice.settings.agent_env import check_allowlist, parse_agent_env_entry


class ActionSettings(BaseModel):
    """From a tool call to a confirmed action run by an ACP agent; part of
    :class:`~openab_voice.config.Settings`, whose one model validator checks fields against each other."""

    # --- tools ---
    tool_router_enabled: bool = Field(
        default=True,
        description=(
            "The voice model's tools, always through the ToolRouter: per-turn budgets, output "
            "truncation and an audit row per call in the job store's database; false: no tool runs, "
            "every call is refused (TOOL_ROUTER_DISABLED)."
        ),
    )
    tool_max_calls_per_turn: int = Field(default=4, ge=0, le=64, description="Tool calls per dialogue turn.")
    tool_max_proposals_per_turn: int = Field(
        default=1, ge=0, le=16, description="Task proposals (start_agent_task) per dialogue turn."
    )
    tool_max_runtime_s_per_turn: float = Field(
        default=10.0, gt=0, le=600, description="Tool time per dialogue turn, all calls together."
    )
    tool_max_output_chars: int = Field(
        default=2000, ge=64, le=100_000, description="Longest tool result the model gets (JSON characters)."
    )

    # --- actions ---
    actions_enabled: bool = Field(
        default=False, description="Turn spoken task requests into confirmable actions."
    )
    operator_user_id: int | None = Field(
        default=None, gt=0, description="The only Discord user who can confirm actions."
    )
    action_channel_id: int | None = Field(
        default=None, gt=0, description="Control text channel (default: where /voice join was used)."
    )
    action_expiry_s: float = Field(
        default=300.0, gt=0, le=86_400, description="A proposal not confirmed by then expires."
    )
    action_max_effect: Literal["read_only", "workspace_write", "workspace_exec", "external"] = Field(
        default="workspace_exec",
        description=(
            "Highest effect ceiling a confirmation grants (the proposal's hint is capped by it); "
            "workspace_exec is only granted by its own button and only inside the agent sandbox."
        ),
    )
    acp_sandbox: Literal["auto", "bwrap", "pod", "off"] = Field(
        default="auto",
        description=(
            "Agent containment: auto or bwrap (bubblewrap; where it cannot start, actions are refused "
            "with the reason), pod (a fresh Kubernetes pod per action), or off (no containment: only "
            "by this explicit choice, shown on every proposal)."
        ),
    )
    action_pod_image: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="OPENAB_ACP_SANDBOX=pod: the image of the action pods (it holds the agent command).",
    )
    action_pod_namespace: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="OPENAB_ACP_SANDBOX=pod: where action pods run (default: the dispatcher's own namespace).",
    )
    action_pod_agent_secret: str = Field(
        default="openab-agent",
        pattern=r"^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$",
        description="OPENAB_ACP_SANDBOX=pod: the secret whose keys become the agent's environment (its own keys).",
    )
    action_pod_service_account: str = Field(
        default="openab-voice-action",
        pattern=r"^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$",
        description="OPENAB_ACP_SANDBOX=pod: the action pods' service account (its token is never mounted).",
    )
    action_pod_cpu: str = Field(
        default="1",
        pattern=r"^[0-9]+(\.[0-9]+)?m?$",
        description="OPENAB_ACP_SANDBOX=pod: an action pod's CPU limit (a quarter of it is requested).",
    )
    action_pod_memory: str = Field(
        default="2Gi",
        pattern=r"^[0-9]+(Ki|Mi|Gi)$",
        description="OPENAB_ACP_SANDBOX=pod: an action pod's memory limit (a quarter of it is requested).",
    )
    action_pod_workspace_size: str = Field(
        default="1Gi",
        pattern=r"^[0-9]+(Mi|Gi|Ti)$",
        description="OPENAB_ACP_SANDBOX=pod: the size of each action's workspace volume claim.",
    )
    action_pod_storage_class: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$",
        description="OPENAB_ACP_SANDBOX=pod: the workspace claims' storage class (default: the cluster's).",
    )
    action_pod_start_timeout_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="OPENAB_ACP_SANDBOX=pod: longest wait for an action pod to run; past it the action fails.",
    )
    trusted_listener_ids: tuple[int, ...] = Field(
        default=(),
        description="Comma-separated user ids; results are spoken in full only if every listener is one.",
    )
    acp_agent_command: str = Field(
        default="",
        max_length=2000,
        description="ACP agent command line, shell-split (one process per action).",
    )
    acp_env_allowlist: tuple[str, ...] = Field(
        default=("PATH", "LANG", "LC_ALL", "TERM"),
        description="Comma-separated variables passed to the agent (its credentials; never our secrets).",
    )
    acp_env: tuple[str, ...] = Field(
        default=(),
        description=(
            "Comma-separated agent credentials NAME=FROM_VAR (the agent's NAME gets our FROM_VAR, or the "
            "file FROM_VAR_FILE names) or NAME=@/path (read at each spawn); NAME may be one of our "
            "names, e.g. OPENAI_API_KEY=CODEX_OPENAI_API_KEY: the agent's key, never ours."
        ),
    )
    acp_auth_method: str | None = Field(
        default=None,
        max_length=200,
        description="ACP authenticate method id sent before session/new (e.g. codex-acp's openai-api-key).",
    )
    acp_turn_timeout_s: float = Field(
        default=900.0, gt=0, le=86_400, description="Longest agent turn before it is stopped."
    )
    acp_cancel_grace_s: float = Field(
        default=5.0, gt=0, le=600, description="Wait for the agent to confirm a cancel before killing it."
    )
    workspace_repo: Path | None = Field(
        default=None, description="Git repository; each action works in a fresh worktree of it."
    )

    # --- executors and leases ---
    node_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$",
        description=(
            "This process's name in job leases (default: the host name); unique among live bots, and "
            "among live workers, sharing one store. A restarted bot loses its own previous leases."
        ),
    )
    lease_s: float = Field(
        default=30.0,
        ge=2,
        le=3600,
        description="A running job whose lease is not renewed for this long is lost (outcome_unknown).",
    )
    heartbeat_s: float = Field(
        default=10.0, gt=0, le=1800, description="How often leases are renewed and dead ones reaped."
    )
    executor: Literal["local", "remote"] = Field(
        default="local",
        description=(
            "Where confirmed actions run: local (in the bot's process) or remote (openab-voice executor "
            "workers claim them from the PostgreSQL store; the bot only delivers their results)."
        ),
    )
    executor_concurrency: int = Field(
        default=1, ge=1, le=64, description="openab-voice executor: most actions one worker runs at once."
    )
    executor_poll_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description=(
            "openab-voice executor: wait between claims when idle or full; a remote-executor bot: how "
            "often it reads the store for settled results."
        ),
    )
    executor_drain_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="openab-voice executor: longest SIGTERM drain (stop agents per ACP, settle) before exit.",
    )

    @field_validator("trusted_listener_ids", "acp_env_allowlist", "acp_env", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("acp_env_allowlist")
    @classmethod
    def _no_secret_in_agent_env(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        check_allowlist(value)
        return value

    @field_validator("acp_env")
    @classmethod
    def _agent_credentials(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parse_agent_env_entry(entry)
        return value
