"""The one provider registry: a configured name (``"webrtc"``, ``"piper"`` ...) to the module that
implements it, imported only when the provider is created.

Each capability's seam module declares its table and a registry factory on this class:
:mod:`~openab_voice.providers.apm`, :mod:`~openab_voice.providers.vad`,
:mod:`~openab_voice.providers.tts`, :mod:`~openab_voice.providers.chat` and :mod:`openab_voice.stt.base`.
A missing optional dependency surfaces as a structured :class:`~openab_voice.errors.ProviderUnavailable`
naming the extra to install, at start-up, never as an ``ImportError`` when the package is imported.
The importer is injectable so tests can simulate an absent library::

    registry = apm_registry().with_importer(refuse({"livekit"}))
    registry.create("webrtc", config)  # -> ProviderUnavailable(extra="audio")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, TypeVar, cast

from openab_voice.errors import ConfigError, ProviderUnavailable

C = TypeVar("C")
P = TypeVar("P")
Importer = Callable[[str], ModuleType]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSpec:
    """How to build one provider.

    Attributes:
        name: the configured name.
        module: implementation module, imported only when the provider is created.
        factory: name of the ``(config) -> provider`` callable in ``module``.
        requires: third-party modules the implementation needs; checked first so the error names
            the missing library and the extra that installs it.
        extra: the ``openab-voice[...]`` extra providing ``requires`` (None: a core dependency).
        development_only: selectable only by naming it explicitly; reported as degraded.
        summary: one line for ``check-config`` and the self-test.
    """

    name: str
    module: str
    factory: str = "create"
    requires: tuple[str, ...] = ()
    extra: str | None = None
    development_only: bool = False
    summary: str = ""


class ProviderRegistry(Generic[C, P]):
    """Name -> lazy factory for one kind of provider (``kind`` is e.g. ``"apm"``)."""

    def __init__(
        self,
        kind: str,
        specs: Iterable[ProviderSpec] = (),
        *,
        importer: Importer = importlib.import_module,
    ) -> None:
        self.kind = kind
        self._specs: dict[str, ProviderSpec] = {}
        self._direct: dict[str, Callable[[C], P]] = {}
        self._importer = importer
        for spec in specs:
            self.register(spec)

    def register(self, spec: ProviderSpec, factory: Callable[[C], P] | None = None) -> None:
        """Add or replace a provider; ``factory`` (tests, plugins) bypasses the module import."""
        self._specs[spec.name] = spec
        if factory is not None:
            self._direct[spec.name] = factory
        else:
            self._direct.pop(spec.name, None)

    def names(self) -> tuple[str, ...]:
        """Registered provider names, in registration order."""
        return tuple(self._specs)

    def spec(self, name: str) -> ProviderSpec:
        """The spec for ``name``.

        Raises:
            ConfigError: the name is not registered (a typo in configuration).
        """
        try:
            return self._specs[name]
        except KeyError:
            raise ConfigError(
                f"unknown {self.kind} provider {name!r}; choose one of {', '.join(self._specs)}",
                setting=f"{self.kind}_provider",
            ) from None

    def with_importer(self, importer: Importer) -> ProviderRegistry[C, P]:
        """A copy that imports through ``importer`` (tests simulate a missing library with it)."""
        copy: ProviderRegistry[C, P] = ProviderRegistry(self.kind, importer=importer)
        for name, spec in self._specs.items():
            copy.register(spec, self._direct.get(name))
        return copy

    def factory(self, name: str) -> Callable[[C], P]:
        """Resolve the factory for ``name``, importing what it needs.

        Raises:
            ConfigError: unknown name.
            ProviderUnavailable: a required module is missing (the error names the extra).
        """
        spec = self.spec(name)
        direct = self._direct.get(name)
        if direct is not None:
            return direct
        for module in (*spec.requires, spec.module):
            try:
                self._importer(module)
            except ImportError as exc:
                raise self._unavailable(spec, f"cannot import {module!r}: {exc}", missing=module) from exc
        factory = getattr(self._importer(spec.module), spec.factory)
        return cast(Callable[[C], P], factory)

    def create(self, name: str, config: C) -> P:
        """Build a provider instance.

        Raises:
            ConfigError: unknown name.
            ProviderUnavailable: the provider cannot start (missing library, model, native failure);
                never a silent fallback to another provider.
        """
        factory = self.factory(name)
        try:
            return factory(config)
        except ProviderUnavailable:
            raise
        except Exception as exc:  # a native library failing to initialise is a start-up error
            raise self._unavailable(self.spec(name), f"failed to start: {exc}") from exc

    def _unavailable(
        self, spec: ProviderSpec, reason: str, *, missing: str | None = None
    ) -> ProviderUnavailable:
        details: dict[str, Any] = {"kind": self.kind, "provider": spec.name, "extra": spec.extra}
        if missing is not None:
            details["missing_module"] = missing
        if spec.extra is not None:
            details["install"] = f"pip install 'openab-voice[{spec.extra}]'"
        hint = f" (install the {spec.extra!r} extra)" if spec.extra else ""
        return ProviderUnavailable(
            f"{self.kind} provider {spec.name!r} unavailable: {reason}{hint}", **details
        )


def refuse(modules: Collection[str], importer: Importer = importlib.import_module) -> Importer:
    """An importer that behaves as if ``modules`` (and their submodules) were not installed."""

    def _import(name: str) -> ModuleType:
        root = name.split(".")[0]
        if name in modules or root in modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return importer(name)

    return _import
