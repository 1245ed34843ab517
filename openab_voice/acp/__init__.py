"""The ACP client side: one fresh, contained coding agent per confirmed action.

Owns everything between "the operator confirmed" and "here is what the agent did": the workspace
(a fresh directory or git worktree, quarantine, cleanup), spawning the agent with an environment
allowlist in its own process group with stderr drained to a file, the fail-closed permission
resolver (only ``allow_once`` / ``reject_once``, within the confirmed effect ceiling), cancellation per
the ACP prompt-turn spec, and the turn driver that returns a typed
:class:`~openab_voice.acp.types.TurnCompletion` (``outcome_unknown`` + quarantine whenever nobody can
know what the agent did). It knows nothing of Discord, the job store or the voice engine; effect ceilings are the shared
vocabulary of :mod:`openab_voice.jobs`.
"""
