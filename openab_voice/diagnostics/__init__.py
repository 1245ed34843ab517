"""``openab-voice self-test audio|agent``: the real components on shipped speech or fake providers,
offline, with honest pass/fail results (:mod:`~openab_voice.diagnostics.audio`,
:mod:`~openab_voice.diagnostics.agent`).

An entry point, above the planes: it may use :mod:`openab_voice.testing` fakes, and no plane imports
it (docs/adr/0009-one-way-layers.md)."""
