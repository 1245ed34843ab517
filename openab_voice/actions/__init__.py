"""The action plane: what the voice model may propose and what the operator must confirm.

Owns the job state machine (:mod:`.jobs`), the ActionBroker (trusted context minted server-side,
idempotency, expiry, operator-only confirmation, result delivery text-first) and restart
reconciliation. It never trusts provider output: a transcript or tool call can propose, never approve.
"""
