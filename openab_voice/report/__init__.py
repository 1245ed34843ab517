"""Observers that turn bus events into something a person reads: the terminal reporter (one line per
notable event), the demo report (:mod:`~openab_voice.report.builder`) and its self-contained HTML page
(:mod:`~openab_voice.report.page`, charts in :mod:`~openab_voice.report.charts`).

This package sits above the planes and the composition root: it may import their events, and nothing
below it imports it (docs/adr/0009-one-way-layers.md)."""
