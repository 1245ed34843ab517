"""Long-term memory on SQLite and PostgreSQL with the real offline embedder: it persists across a
restart, a corrupted or torn vector file, an edited row, a row without a vector and a changed
embedder are each detected and nothing unverified is returned until a rebuild; credentials are
refused; memory that is off reads and writes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy import Engine, text

from openab_voice.app.records import build_record_parts
from openab_voice.cli import main
from openab_voice.clock import FakeClock
from openab_voice.config import load_settings
from openab_voice.memory.embedder import MiniLMEmbedder, load_minilm
from openab_voice.memory.intake import remembered_text
from openab_voice.memory.long_term import UNAVAILABLE, LongTermMemory, MemoryKind, SaveRefused
from openab_voice.memory.sensitivity import refusal
from openab_voice.memory.tools import register_memory_tools
from openab_voice.providers.chat import ToolCall
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.memory_rows import MemoryRecord, MemoryRows, NewMemory
from openab_voice.tools import ToolContext, ToolRegistry

GUILD, OTHER_GUILD = 111, 222


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return load_minilm()


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    upgrade(db_url)
    engine = open_engine(db_url)
    try:
        yield engine
    finally:
        engine.dispose()


def memory(engine: Engine, embedder: Any, path: Path, clock: FakeClock | None = None) -> LongTermMemory:
    return LongTermMemory(MemoryRows(engine), embedder, path=path, clock=clock or FakeClock())


def save(mem: LongTermMemory, text: str, *, speaker: str = "1001", guild: int = GUILD) -> MemoryRecord:
    outcome = mem.save(
        guild_id=guild, kind=MemoryKind.PREFERENCE, text=text, speaker_id=speaker, source="test"
    )
    assert isinstance(outcome, MemoryRecord), outcome
    return outcome


def test_the_embedder_matches_sentence_transformers(embedder: MiniLMEmbedder) -> None:
    # sentence-transformers' all-MiniLM-L6-v2 (torch) gives these first five values for this sentence.
    vector = embedder.embed(["This is an example sentence"])[0]
    np.testing.assert_allclose(vector[:5], [0.0676569, 0.0634959, 0.0487131, 0.0793050, 0.0374481], atol=2e-6)
    assert vector.dtype == np.float32 and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    pair = embedder.embed(
        ["The cat sits on the mat.", "A cat is sitting on a mat.", "Stock markets fell today."]
    )
    assert float(pair[0] @ pair[1]) > 0.9 > 0.2 > float(pair[0] @ pair[2])
    assert embedder.fingerprint.startswith("all-MiniLM-L6-v2/numpy/") and embedder.dimension == 384


@pytest.mark.parametrize(
    "said",
    [
        "my password is hunter2",
        "the api key: abc123",
        "use sk-proj-abcdefghijklmnop1234",
        "token=ghp_abcdefghijklmnopqrstuvwxyz0123",
        "my card is 4111 1111 1111 1111",
        "the cvv 123",
        "IBAN DE89 3704 0044 0532 0130 00",
        "my social security number is 078-05-1120",
        "passport number X1234567",
        "Authorization: Bearer abcdefghijklmnopqrstuvwx",
    ],
)
def test_sensitive_text_is_refused(said: str) -> None:
    assert refusal(said) is not None


@pytest.mark.parametrize(
    "said",
    ["Alice prefers tea over coffee", "the release is on Friday at 3 pm", "Bob's project is called Falcon 9"],
)
def test_ordinary_text_is_not(said: str) -> None:
    assert refusal(said) is None


def test_saved_memories_persist_across_a_restart(
    engine: Engine, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    path = tmp_path / "vectors.bin"
    first = memory(engine, embedder, path)
    assert first.open().ok
    tea = save(first, "Alice prefers tea over coffee")
    save(first, "The release is planned for Friday")
    save(first, "Alice prefers green over blue", guild=OTHER_GUILD)
    refused = first.save(
        guild_id=GUILD, kind=MemoryKind.FACT, text="my password is hunter2", speaker_id="1001", source="test"
    )
    assert isinstance(refused, SaveRefused) and "credentials are never saved" in refused.reason
    first.close()

    second = memory(engine, embedder, path)
    health = second.open()
    assert (health.ok, health.records) == (True, 3)
    hits = second.search(guild_id=GUILD, query="what does Alice like to drink?", k=3)
    assert hits[0].record.id == tea.id and hits[0].record.speaker_id == "1001"
    assert all(h.record.guild_id == GUILD for h in hits)  # the other guild's record is not offered
    assert [r.text for r in second.recent(guild_id=GUILD)] == [
        "The release is planned for Friday",
        "Alice prefers tea over coffee",
    ]
    # Forgetting: the speaker or the operator only.
    assert second.forget(tea.id, guild_id=GUILD, user_id=2002, operator_id=9) is not None
    assert second.forget(tea.id, guild_id=GUILD, user_id=9, operator_id=9) is None
    second.close()
    third = memory(engine, embedder, path)
    assert third.open().ok and third.open().records == 2
    assert [h.record.text for h in third.search(guild_id=GUILD, query="tea", k=3)] == []
    third.close()


def corrupt_a_vector(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0xFF
    path.write_bytes(bytes(raw))


def tear_the_tail(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-7])


@pytest.mark.parametrize(
    ("damage", "code"),
    [(corrupt_a_vector, "MEMORY_INDEX_CORRUPT"), (tear_the_tail, "MEMORY_INDEX_CORRUPT")],
)
def test_a_damaged_vector_file_returns_nothing_until_rebuilt(
    engine: Engine, embedder: MiniLMEmbedder, tmp_path: Path, damage: Any, code: str
) -> None:
    path = tmp_path / "vectors.bin"
    mem = memory(engine, embedder, path)
    mem.open()
    save(mem, "Alice prefers tea over coffee")
    save(mem, "Bob works on project Falcon")
    mem.close()
    damage(path)

    broken = memory(engine, embedder, path)
    health = broken.open()
    assert health.code == code
    assert broken.search(guild_id=GUILD, query="tea", k=3) == []
    assert broken.recent(guild_id=GUILD) == []
    assert broken.save(
        guild_id=GUILD, kind=MemoryKind.FACT, text="x is y", speaker_id="1", source="t"
    ) == SaveRefused(UNAVAILABLE)
    assert broken.rebuild().ok
    assert [h.record.text for h in broken.search(guild_id=GUILD, query="tea", k=1)] == [
        "Alice prefers tea over coffee"
    ]
    broken.close()


def test_an_edited_row_and_a_row_without_a_vector_are_detected(
    engine: Engine, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    path = tmp_path / "vectors.bin"
    mem = memory(engine, embedder, path)
    mem.open()
    kept = save(mem, "Alice prefers tea over coffee")
    edited = save(mem, "Bob prefers coffee")
    mem.close()
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE memory_records SET text = 'Bob is the admin' WHERE id = :id"), {"id": edited.id}
        )
    again = memory(engine, embedder, path)
    assert again.open().code == "MEMORY_ROW_CORRUPT"
    assert again.search(guild_id=GUILD, query="who is the admin", k=3) == []
    # The rebuild drops what no longer verifies and keeps the rest.
    assert again.rebuild().ok
    assert [r.id for r in again.recent(guild_id=GUILD)] == [kept.id]
    again.close()

    MemoryRows(engine).insert(
        NewMemory(
            guild_id=GUILD,
            kind="fact",
            text="a row written behind the memory's back",
            speaker_id="1",
            source="sql",
            sensitivity="none",
            created_at=1.0,
            vector_sha="0" * 64,
        )
    )
    orphaned = memory(engine, embedder, path)
    assert orphaned.open().code == "MEMORY_INDEX_MISMATCH"
    assert orphaned.search(guild_id=GUILD, query="tea", k=3) == []
    orphaned.close()


class Renamed:
    """The same vectors under another fingerprint: a changed embedder."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self._inner = inner

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def fingerprint(self) -> str:
        return "another-embedder/v2"

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return self._inner.embed(texts)


def test_a_changed_embedder_is_detected(engine: Engine, embedder: MiniLMEmbedder, tmp_path: Path) -> None:
    path = tmp_path / "vectors.bin"
    mem = memory(engine, embedder, path)
    mem.open()
    save(mem, "Alice prefers tea over coffee")
    mem.close()
    changed = memory(engine, Renamed(embedder), path)
    health = changed.open()
    assert health.code == "MEMORY_EMBEDDER_CHANGED" and "another-embedder/v2" in health.reason
    assert changed.search(guild_id=GUILD, query="tea", k=3) == []
    assert changed.rebuild().ok  # re-embedded under the new fingerprint
    assert len(changed.search(guild_id=GUILD, query="tea", k=3)) == 1
    changed.close()


async def test_the_tools_save_under_the_speaker_and_say_why_not(
    engine: Engine, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    clock = FakeClock()
    mem = memory(engine, embedder, tmp_path / "vectors.bin", clock)
    mem.open()
    registry = ToolRegistry(clock)
    register_memory_tools(registry, mem, guild_id=GUILD)
    alice = ToolContext(session_id="s", turn_id="t", speaker_id="1001")

    async def call(name: str, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        result = await registry.call(ToolCall(id="c", name=name, arguments=json.dumps(arguments)), context)
        assert result.ok, result
        return result.content

    saved = await call("memory_save", {"text": "Alice prefers tea", "kind": "preference"}, alice)
    assert saved["saved"] is True
    refused = await call("memory_save", {"text": "my password is hunter2"}, alice)
    assert refused["saved"] is False and "credentials are never saved" in refused["reason"]
    anonymous = await call("memory_save", {"text": "something"}, ToolContext())
    assert anonymous == {"saved": False, "reason": "only what a known speaker said can be saved"}
    found = await call("memory_search", {"query": "what does Alice drink"}, alice)
    assert [(r["text"], r["speaker_id"], r["kind"]) for r in found["results"]] == [
        ("Alice prefers tea", "1001", "preference")
    ]
    mem.close()


def test_memory_off_reads_and_writes_nothing(tmp_path: Path) -> None:
    settings = load_settings({}, data_dir=tmp_path / "data", tool_router_enabled=True)
    parts = build_record_parts(settings)
    assert parts is not None and parts.memory is None
    parts.close()
    with open_engine(f"sqlite:///{tmp_path / 'data' / 'openab-voice.db'}").connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM memory_records")).scalar() == 0
    assert not (tmp_path / "data" / "memory-vectors.bin").exists()


def test_memory_on_is_opened_and_checked_at_start(tmp_path: Path) -> None:
    settings = load_settings({}, data_dir=tmp_path / "data", memory_enabled=True)
    parts = build_record_parts(settings)
    assert parts is not None and parts.memory is not None
    try:
        assert parts.memory.health.ok and (tmp_path / "data" / "memory-vectors.bin").exists()
    finally:
        parts.close()


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        ("Remember that Alice prefers tea.", "Alice prefers tea."),
        ("Jarvis, please remember: the build runs at noon", "the build runs at noon"),
        ("okay remember the password is in the vault", "the password is in the vault"),
        ("Do you remember that film?", None),
        ("I remember that day", None),
        ("remember that", None),
        ("Bob, remember that the demo is tomorrow", None),  # addressed to Bob, not to the bot
    ],
)
def test_the_spoken_phrase(said: str, fact: str | None) -> None:
    assert remembered_text(said, wake_name="Jarvis") == fact


def test_memory_rebuild_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OPENAB_MEMORY_ENABLED", "true")
    parts = build_record_parts(load_settings())
    assert parts is not None and parts.memory is not None
    save(parts.memory, "Alice prefers tea over coffee")
    parts.close()
    tear_the_tail(tmp_path / "data" / "memory-vectors.bin")
    parts = build_record_parts(load_settings())
    assert parts is not None and parts.memory is not None
    assert parts.memory.health.code == "MEMORY_INDEX_CORRUPT"
    parts.close()
    assert main(["memory", "rebuild", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True,
        "code": None,
        "reason": "1 records verified",
        "records": 1,
    }
    parts = build_record_parts(load_settings())
    assert parts is not None and parts.memory is not None and parts.memory.health.ok
    parts.close()
