"""Network impairments for emulated speakers: seeded loss, reordering and jitter.

The planner is pure apart from its seeded random generator, so a given seed always produces the
same fate for the same packet sequence (tests assert exact counts).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from openab_voice.errors import EmulatorError, ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class Impairments:
    """What the emulated network does to a speaker's packets.

    Attributes:
        loss: probability in ``[0, 1]`` that a packet is dropped.
        reorder: probability in ``[0, 1]`` that a packet swaps places with the next one.
        jitter_ms: each packet is delayed by a uniform random ``[0, jitter_ms]`` extra milliseconds.
    """

    loss: float = 0.0
    reorder: float = 0.0
    jitter_ms: float = 0.0

    def __post_init__(self) -> None:
        for name in ("loss", "reorder"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise EmulatorError(
                    f"{name} must be in [0, 1], got {value}", code=ErrorCode.EMULATOR_BAD_CONFIG
                )
        if self.jitter_ms < 0.0:
            raise EmulatorError("jitter_ms must not be negative", code=ErrorCode.EMULATOR_BAD_CONFIG)

    def override(
        self, *, loss: float | None = None, reorder: float | None = None, jitter_ms: float | None = None
    ) -> Impairments:
        """A copy with the given fields replaced (``None`` keeps the current value)."""
        return Impairments(
            loss=self.loss if loss is None else loss,
            reorder=self.reorder if reorder is None else reorder,
            jitter_ms=self.jitter_ms if jitter_ms is None else jitter_ms,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PacketFate:
    """What happens to one packet.

    Attributes:
        dropped: the packet is never sent.
        swapped: the packet is held back and sent after the next one.
        extra_delay: seconds of jitter added to its deadline.
    """

    dropped: bool
    swapped: bool
    extra_delay: float


class ImpairmentPlanner:
    """Draws a :class:`PacketFate` per packet from a seeded generator.

    Args:
        impairments: the probabilities to apply.
        seed: seeds the generator; one planner per speaker and utterance keeps runs reproducible.
    """

    def __init__(self, impairments: Impairments, *, seed: int) -> None:
        self._imp = impairments
        self._rng = random.Random(seed)

    def next(self) -> PacketFate:
        """The fate of the next packet.

        Three draws happen for every packet, whatever the probabilities, so changing one
        probability does not shift the others' random streams.
        """
        lost = self._rng.random()
        swap = self._rng.random()
        jitter = self._rng.random()
        return PacketFate(
            dropped=lost < self._imp.loss,
            swapped=swap < self._imp.reorder,
            extra_delay=jitter * self._imp.jitter_ms / 1000.0,
        )
