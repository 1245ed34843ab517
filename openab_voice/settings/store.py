"""What is kept: the job store, the meeting record and long-term memory (env names in
:mod:`openab_voice.settings.names`)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr


class StoreSettings(BaseModel):
    """Where and for how long openab-voice keeps things; part of :class:`~openab_voice.config.Settings`."""

    # --- storage ---
    database_url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL of the job store (secret; default: SQLite in OPENAB_DATA_DIR).",
    )
    data_dir: Path = Field(
        default_factory=lambda: _default_data_dir(),
        description="Where the SQLite store, workspaces and agent logs live.",
    )

    # --- meeting record ---
    transcript_store: bool = Field(
        default=False,
        description=(
            "Store each voice session's finals (speaker, times) and the bot's heard utterances in the "
            "job store's database, for /voice transcript and /voice summary."
        ),
    )
    transcript_retention_days: float = Field(
        default=30.0, gt=0, le=3650, description="Stored voice sessions older than this are deleted."
    )
    transcript_summary_chars: int = Field(
        default=12_000,
        ge=500,
        le=200_000,
        description="Most transcript characters (its end) /voice summary gives the chat model.",
    )

    # --- long-term memory ---
    memory_enabled: bool = Field(
        default=False,
        description=(
            "Long-term memory: typed records in the job store's database, vectors from the offline "
            "all-MiniLM-L6-v2 embedder in a FAISS index; off: no reads, no writes."
        ),
    )
    memory_top_k: int = Field(default=3, ge=1, le=20, description="Memories given to the model per turn.")
    memory_min_score: float = Field(
        default=0.3, ge=-1.0, le=1.0, description="Least cosine similarity of a memory given to the model."
    )
    memory_vectors_path: Path | None = Field(
        default=None,
        description="The memory's vector file (default: memory-vectors.bin in OPENAB_DATA_DIR).",
    )


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "openab-voice"
