"""``openab-voice demo``: the real bot against the loopback emulator, driven by a JSON scenario,
with a report and per-speaker recordings derived from what the bot actually heard."""
