"""The fail-closed permission resolver: every branch, no I/O beyond resolving paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp.schema import AllowedOutcome, DeniedOutcome, PermissionOption, ToolCallLocation, ToolCallUpdate

from openab_voice.acp.permissions import cancelled, is_inside, needed_effect, resolve, to_response
from openab_voice.jobs import EffectCeiling

ONCE = ("allow_once", "reject_once")


def options(*kinds: str) -> list[PermissionOption]:
    return [PermissionOption(option_id=f"id-{kind}", name=kind, kind=kind) for kind in kinds]  # type: ignore[arg-type]


def call(kind: str | None, *paths: str | Path) -> ToolCallUpdate:
    locations = [ToolCallLocation(path=str(p)) for p in paths] if paths else None
    return ToolCallUpdate(tool_call_id="tc-1", title="a tool", kind=kind, locations=locations)  # type: ignore[arg-type]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.mark.parametrize("kind", ["read", "search", "think"])
def test_looking_kinds_need_read_only(kind: str, ws: Path) -> None:
    assert needed_effect(call(kind, "/etc/hosts"), ws)[0] is EffectCeiling.READ_ONLY


@pytest.mark.parametrize("kind", ["edit", "delete", "move"])
def test_writes_inside_the_workspace_need_workspace_write(kind: str, ws: Path) -> None:
    needed, reason = needed_effect(call(kind, ws / "a.py", ws / "sub" / "b.py"), ws)
    assert needed is EffectCeiling.WORKSPACE_WRITE
    assert "only the workspace" in reason


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "relative/inside.py", "{ws}/../escape.py", "{ws}-sibling/x.py"],
    ids=["absolute-outside", "relative", "dot-dot", "prefix-sibling"],
)
def test_writes_anywhere_else_need_external(path: str, ws: Path) -> None:
    assert needed_effect(call("edit", ws / "ok.py", path.format(ws=ws)), ws)[0] is EffectCeiling.EXTERNAL


def test_a_write_with_no_location_needs_external(ws: Path) -> None:
    needed, reason = needed_effect(call("move"), ws)
    assert needed is EffectCeiling.EXTERNAL
    assert "no location" in reason


def test_a_symlink_out_of_the_workspace_is_outside(ws: Path, tmp_path: Path) -> None:
    (ws / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert not is_inside(str(ws / "link" / "x.py"), ws)
    assert needed_effect(call("edit", ws / "link" / "x.py"), ws)[0] is EffectCeiling.EXTERNAL


@pytest.mark.parametrize("kind", ["execute", "fetch", "other", "switch_mode", None])
def test_effectful_unknown_or_missing_kinds_need_external(kind: str | None, ws: Path) -> None:
    assert needed_effect(call(kind, ws / "inside.py"), ws)[0] is EffectCeiling.EXTERNAL


def test_within_the_ceiling_allow_once_is_selected(ws: Path) -> None:
    decision = resolve(
        call("edit", ws / "a"),
        options("allow_always", "allow_once", "reject_once"),
        EffectCeiling.WORKSPACE_WRITE,
        workspace=ws,
    )
    assert (decision.outcome, decision.option_kind, decision.option_id) == (
        "selected",
        "allow_once",
        "id-allow_once",
    )
    assert decision.needed is EffectCeiling.WORKSPACE_WRITE
    assert decision.offered == ("allow_always", "allow_once", "reject_once")
    assert "within" in decision.reason
    assert to_response(decision).outcome == AllowedOutcome(outcome="selected", option_id="id-allow_once")


def test_above_the_ceiling_reject_once_is_selected(ws: Path) -> None:
    decision = resolve(
        call("execute"), options(*ONCE, "allow_always"), EffectCeiling.WORKSPACE_WRITE, workspace=ws
    )
    assert (decision.outcome, decision.option_kind) == ("selected", "reject_once")
    assert decision.needed is EffectCeiling.EXTERNAL
    assert "exceeds" in decision.reason


def test_read_only_ceiling_rejects_a_workspace_write(ws: Path) -> None:
    decision = resolve(call("edit", ws / "a"), options(*ONCE), EffectCeiling.READ_ONLY, workspace=ws)
    assert decision.option_kind == "reject_once"


def test_external_ceiling_allows_everything_once(ws: Path) -> None:
    decision = resolve(call(None), options(*ONCE), EffectCeiling.EXTERNAL, workspace=ws)
    assert decision.option_kind == "allow_once"


@pytest.mark.parametrize("ceiling", list(EffectCeiling))
def test_only_persistent_options_offered_is_cancelled(ceiling: EffectCeiling, ws: Path) -> None:
    decision = resolve(call("read"), options("allow_always", "reject_always"), ceiling, workspace=ws)
    assert (decision.outcome, decision.option_id, decision.option_kind) == ("cancelled", None, None)
    assert "no allow_once option was offered" in decision.reason
    assert to_response(decision).outcome == DeniedOutcome(outcome="cancelled")


def test_missing_reject_once_is_cancelled_not_allowed(ws: Path) -> None:
    decision = resolve(
        call("execute"), options("allow_once", "allow_always"), EffectCeiling.READ_ONLY, workspace=ws
    )
    assert decision.outcome == "cancelled"
    assert "no reject_once option" in decision.reason


def test_no_options_at_all_is_cancelled(ws: Path) -> None:
    assert resolve(call("read"), [], EffectCeiling.EXTERNAL, workspace=ws).outcome == "cancelled"


def test_cancelled_grants_nothing_but_records_the_need(ws: Path) -> None:
    decision = cancelled(
        call("edit", ws / "a"), options(*ONCE), workspace=ws, reason="a cancel is in progress"
    )
    assert (decision.outcome, decision.option_kind) == ("cancelled", None)
    assert decision.needed is EffectCeiling.WORKSPACE_WRITE
    assert decision.offered == ONCE
    assert decision.reason == "a cancel is in progress"
