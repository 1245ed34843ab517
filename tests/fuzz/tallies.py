"""A fuzz target's tally: what each input came to, asserted once the examples ran."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

ACCEPTED = "accepted"
REJECTED = "rejected:"


@dataclass(slots=True)
class Tally:
    """One target's outcomes: each input counted once, as ``accepted...`` or ``rejected:<reason>``
    (or another bucket the target names); a crash is no bucket, it fails the test."""

    counts: Counter[str] = field(default_factory=Counter)
    inputs: int = 0

    def check(
        self,
        *,
        buckets: tuple[str, ...] = (ACCEPTED, REJECTED),
        seen: tuple[str, ...] | None = None,
        never: tuple[str, ...] = (),
    ) -> None:
        """Assert that every input was counted once, in a known bucket, and that each bucket of
        ``seen`` (default: ``buckets``) counted some input while those of ``never`` counted none.
        A bucket is a prefix of the outcome names."""
        assert self.inputs > 0, "no input ran"
        assert self.counts.total() == self.inputs, (self.inputs, self.counts)
        assert all(n > 0 for n in self.counts.values()), self.counts
        unknown = sorted(k for k in self.counts if not k.startswith(buckets))
        assert not unknown, f"outcomes outside {buckets}: {unknown}"
        for bucket in buckets if seen is None else seen:
            assert any(k.startswith(bucket) for k in self.counts), f"no {bucket!r} outcome: {self.counts}"
        for bucket in never:
            assert not any(k.startswith(bucket) for k in self.counts), f"{bucket!r} outcome: {self.counts}"
