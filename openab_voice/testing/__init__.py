"""Test doubles users need too: the loopback Discord emulator (``openab_voice.testing.emulator``)."""
