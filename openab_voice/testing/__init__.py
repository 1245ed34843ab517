"""What users need to test a bot offline too: the loopback Discord emulator
(``openab_voice.testing.emulator``), the bot-on-emulator harness, a per-speaker recorder, a scripted
chat model, the dialogue fakes and the conversation rig used by ``self-test agent`` (``rig``, on
self-advancing virtual time, ``virtual_time``, with an expect-style event log, ``events``), the
scripted ACP agent (``python -m openab_voice.testing.acp_agent --mode ...``, a real subprocess
speaking ACP), and the shipped speech clips."""
