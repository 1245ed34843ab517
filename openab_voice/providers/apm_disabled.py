"""The ``disabled`` audio processor: capture passes through untouched.

It exists only so a developer can name it explicitly (``apm provider = disabled``) on a machine
without the WebRTC library. Its capabilities say ``degraded=True``; the front end puts that flag on
every pipeline event and status, and the audio self-test fails with it. It is never a fallback.
"""

from __future__ import annotations

from openab_voice.providers.apm import ApmCapabilities, ApmConfig


class DisabledApm:
    """Pass-through :class:`~openab_voice.providers.apm.AudioProcessor` (degraded by definition)."""

    def __init__(self, config: ApmConfig) -> None:
        self._frame_bytes = config.sample_rate // 100 * 2 * config.channels
        self._caps = ApmCapabilities(
            name="disabled",
            echo_cancellation=False,
            noise_suppression=False,
            auto_gain_control=False,
            high_pass_filter=False,
            degraded=True,
        )

    @property
    def capabilities(self) -> ApmCapabilities:
        return self._caps

    def process_render(self, pcm: bytes) -> None:
        return None

    def process_capture(self, pcm: bytes) -> bytes:
        return bytes(pcm)

    def close(self) -> None:
        return None


def create(config: ApmConfig) -> DisabledApm:
    """Registry factory for ``"disabled"``."""
    return DisabledApm(config)
