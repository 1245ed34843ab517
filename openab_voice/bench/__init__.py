"""``openab-voice bench NAME``: benchmarks that print JSON (receive, frontend, stt, dialogue). Speed
targets are met here, on real components, never in timed unit tests."""
