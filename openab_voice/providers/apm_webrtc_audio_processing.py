"""The optional ``webrtc-audio-processing`` provider (PyPI ``webrtc-audio-processing`` 0.1.x).

Status: not shipped in this version. The package only builds from source with ``swig`` (about 154 s
on two cores) and wraps the 2016-era WebRTC AEC2 (41.7 dB ERLE once converged, but only 18 dB in the
first 2 s; see ``shared/notes/dependencies.md``), so the default ``webrtc`` provider (AEC3 through
livekit) is better on every measure. We do not ship an adapter we cannot test on our CI machines.

Selecting it therefore always ends in a structured :class:`~openab_voice.errors.ProviderUnavailable`
at start-up, never a silent pass-through:

* without the package, the registry reports the missing module and the
  ``webrtc-audio-processing`` extra (``requires`` in the registry spec);
* with the package installed, :func:`create` still refuses and says why.
"""

from __future__ import annotations

from typing import NoReturn

from openab_voice.errors import ProviderUnavailable
from openab_voice.providers.base import ApmConfig


def create(config: ApmConfig) -> NoReturn:
    """Registry factory for ``"webrtc-audio-processing"``: always unavailable (see module docstring).

    Raises:
        ProviderUnavailable: always.
    """
    raise ProviderUnavailable(
        "apm provider 'webrtc-audio-processing' has no tested adapter in this version; "
        "use apm provider 'webrtc' (livekit AEC3)",
        kind="apm",
        provider="webrtc-audio-processing",
        extra="webrtc-audio-processing",
        sample_rate=config.sample_rate,
    )
