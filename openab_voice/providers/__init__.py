"""Provider seams: ``typing.Protocol`` interfaces with frozen capabilities dataclasses, one module per
implementation, chosen by name through registries of lazy factories (:mod:`.registry`). A provider
whose optional dependency is missing raises :class:`~openab_voice.errors.ProviderUnavailable` naming
the extra when it is created, never an ``ImportError`` at import time."""
