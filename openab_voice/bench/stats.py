"""Summary statistics every benchmark reports: count, median, P95 and max of one run's samples."""

from __future__ import annotations

import numpy as np


def summary(values: list[float]) -> dict[str, float | int | None]:
    """``{"n", "p50", "p95", "max"}`` in the samples' unit, rounded to 0.1; None when there are none."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    arr = np.asarray(values, dtype=np.float64)
    p50, p95 = np.percentile(arr, [50, 95])
    return {
        "n": len(values),
        "p50": round(float(p50), 1),
        "p95": round(float(p95), 1),
        "max": round(float(arr.max()), 1),
    }
