"""Speech tools: a task's audio (`inputs.audio`, named audio_1, audio_2, … in an episode) read by name.

clips.py decodes a file to mono samples; whisper.py holds the pinned Whisper tiny.en weights and transcribes;
prosody.py measures pitch, rate, energy and pauses; closed_set.py scores given options against a clip;
speech.py registers `transcribe`, `speech_features` and `which_was_said`.
"""
