"""The conversation: streaming transcription per speaker, turn policy, the pure dialogue state machine,
interruption control, sentence segmentation and speech sanitizing, and the conversation manager that
runs LLM -> sentence -> TTS -> playback and commits only what was heard."""
