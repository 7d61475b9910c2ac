"""Speech tools: a task's audio (`inputs.audio`, named audio_1, audio_2, … in an episode) read by name.

clips.py decodes a file to mono samples; whisper.py holds the pinned Whisper tiny.en weights and transcribes;
prosody.py measures pitch, rate, energy and pauses; speech.py registers `transcribe` and `speech_features`.
"""
