"""The real-cluster test's window on the job store: run inside the cluster's network namespace.

    ip netns exec openab-k8s .venv/bin/python scripts/k8s-offline/store_client.py confirm --goal "..."
    ip netns exec openab-k8s .venv/bin/python scripts/k8s-offline/store_client.py show ID

PostgreSQL is reachable only inside that namespace (its Service's cluster IP, through kube-proxy);
the URL comes from OPENAB_TEST_K8S_DB_URL. ``confirm`` records a job as the bot would after the
operator's confirmation (proposed -> delivered -> confirmed, ceiling workspace_write) and prints its
id; ``show`` prints the job, its transitions and its workspace as one JSON object. The schema is the
executors' job (their migrate init container): this never upgrades it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from openab_voice.clock import SystemClock  # noqa: E402
from openab_voice.store.database import open_engine  # noqa: E402
from openab_voice.store.jobs import JobStore  # noqa: E402
from openab_voice.testing.jobs import OPERATOR_ID, confirm_job  # noqa: E402


def _store() -> JobStore:
    return JobStore(open_engine(os.environ["OPENAB_TEST_K8S_DB_URL"]), SystemClock())


def confirm(store: JobStore, goal: str) -> str:
    return confirm_job(store, goal=goal, expires_at=SystemClock().wall() + 600)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and not isinstance(value, int | float | str):
        return value.value
    return value


def show(store: JobStore, action_id: str) -> dict[str, Any]:
    record = store.require(action_id)
    out: dict[str, Any] = _plain(asdict(record))
    out["terminal"] = record.status.terminal
    out["transitions"] = [
        {
            "event": _plain(t.event),
            "to": _plain(t.to_status),
            "actor": t.actor,
            "reason": t.reason,
            "at": t.at,
        }
        for t in store.transitions(action_id)
    ]
    workspace = store.workspace(record.workspace_id) if record.workspace_id else None
    out["workspace"] = _plain(asdict(workspace)) if workspace is not None else None
    out["workers"] = [_plain(asdict(w)) for w in store.workers()]
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("confirm")
    c.add_argument("--goal", required=True)
    s = sub.add_parser("show")
    s.add_argument("action_id")
    x = sub.add_parser("cancel")  # what the bot's /voice cancel writes for a job a dispatcher runs
    x.add_argument("action_id")
    args = parser.parse_args()
    store = _store()
    try:
        if args.command == "confirm":
            print(confirm(store, args.goal))
        elif args.command == "cancel":
            print(json.dumps({"requested": store.request_cancel(args.action_id, actor=str(OPERATOR_ID))}))
        else:
            print(json.dumps(show(store, args.action_id), default=str))
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
