"""The action plane: what the voice model may propose and what the operator must confirm.

Drives the job state machine (the vocabulary of :mod:`openab_voice.jobs`), owns the ActionBroker (trusted context minted server-side,
idempotency, expiry, operator-only confirmation, result delivery text-first) and restart
reconciliation. It never trusts provider output: a transcript or tool call can propose, never approve.
"""
