"""What users need to test a bot offline too: the loopback Discord emulator
(``openab_voice.testing.emulator``), the bot-on-emulator harness, a per-speaker recorder, a scripted
chat model and the dialogue fakes used by ``self-test agent``, the scripted ACP agent
(``python -m openab_voice.testing.acp_agent --mode ...``, a real subprocess speaking ACP), and the
shipped speech clips."""
