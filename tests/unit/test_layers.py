"""The layer contract of ``pyproject.toml`` (``lint-imports`` in ``.ci/run``; docs/adr/0009-one-way-layers.md).

It holds on the real package, and it fails on a copy of the package into which one upward import (or
an unplaced package, or a plane import in discord's wire half) was added.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the ``openab_voice`` found under ``root``, with the contract of ``root``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The package's sources and its contract, copied to ``tmp_path`` (PYTHONPATH picks the copy)."""
    shutil.copytree(
        ROOT / "openab_voice",
        tmp_path / "openab_voice",
        ignore=shutil.ignore_patterns("__pycache__", "assets", "scenarios"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_package_keeps_its_layers() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_the_copy_keeps_them_too(copy: Path) -> None:
    """The baseline of the failing cases below: an unchanged copy passes."""
    result = lint_imports(copy)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_upward_import_breaks_the_layers_and_makes_a_cycle(copy: Path) -> None:
    # The edge that used to close the package cycle: the store reaching up into the action plane.
    (copy / "openab_voice" / "store" / "upward.py").write_text("from openab_voice.actions import broker\n")
    result = lint_imports(copy)
    assert result.returncode != 0
    out = result.stdout
    assert "openab_voice layers flow one way BROKEN" in out
    assert "openab_voice.store.upward -> openab_voice.actions.broker" in out  # only the copy has it
    assert "no cycle between the top-level packages BROKEN" in out
    assert "discord's wire half knows none of the planes KEPT" in out


def test_a_package_without_a_layer_is_refused(copy: Path) -> None:
    (copy / "openab_voice" / "unplaced").mkdir()
    (copy / "openab_voice" / "unplaced" / "__init__.py").write_text('"""Nobody said where this goes."""\n')
    result = lint_imports(copy)
    assert result.returncode != 0
    assert "openab_voice layers flow one way BROKEN" in result.stdout
    assert "openab_voice.unplaced" in result.stdout


def test_discords_wire_half_may_not_reach_a_plane(copy: Path) -> None:
    # Legal for the package layers (discord sits above the planes), not for the wire half.
    rtp = copy / "openab_voice" / "discord" / "wire" / "rtp.py"
    rtp.write_text(rtp.read_text() + "\nfrom openab_voice.engine import state as _state  # noqa: E402\n")
    result = lint_imports(copy)
    assert result.returncode != 0
    out = result.stdout
    assert "openab_voice layers flow one way KEPT" in out
    assert "discord's wire half knows none of the planes BROKEN" in out
    assert "openab_voice.discord.wire.rtp -> openab_voice.engine.state" in out


def test_discords_wire_half_may_not_reach_its_host_half(copy: Path) -> None:
    rtp = copy / "openab_voice" / "discord" / "wire" / "rtp.py"
    rtp.write_text(rtp.read_text() + "\nfrom openab_voice.discord.host import session as _s  # noqa: E402\n")
    result = lint_imports(copy)
    assert result.returncode != 0
    out = result.stdout
    assert "discord's host half sits on its wire half, never the reverse BROKEN" in out
    assert "openab_voice.discord.wire.rtp -> openab_voice.discord.host.session" in out


def test_a_discord_module_outside_both_halves_is_refused(copy: Path) -> None:
    (copy / "openab_voice" / "discord" / "loose.py").write_text('"""Neither wire nor host."""\n')
    result = lint_imports(copy)
    assert result.returncode != 0
    assert "discord's host half sits on its wire half, never the reverse BROKEN" in result.stdout
    assert "openab_voice.discord.loose" in result.stdout
