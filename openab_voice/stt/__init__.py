"""Speech to text, from a speaker's processed capture to transcript events.

``base`` is the seam (the batch ``SpeechToText`` Protocol, its capabilities, settings and registry);
``faster_whisper`` (with ``whisper_guards`` and ``whisper_models``) is the offline provider;
``recognize`` is the streaming shape (``Recognizer`` / ``RecognizeStream``, livekit's), which
``redecode`` / ``redecode_stream`` adapt a batch provider to by re-decoding the growing utterance
(``utterances``, ``stability``, ``transcripts``); ``transcriber`` runs one stream per speaker; and
``events`` are the transcripts it reports.
"""
