"""Prosody of one clip with Praat (praat-parselmouth): pitch, speaking rate, energy, pauses, word prominence.

Pitch is Praat's autocorrelation tracker over the voiced frames. Pauses are stretches inside the speech whose
intensity stays well below its peak. The speaking rate is in syllables per second from intensity peaks in
voiced stretches (de Jong & Wempe's method, in a few lines), and in words per second when a transcript's word
times are given; with them each word also gets its pitch, loudness and length, and the word that stands out
most on all three is named as the stressed one.
"""

from __future__ import annotations

import math

from .clips import Clip

PITCH_FLOOR, PITCH_CEILING = 60.0, 500.0  # Hz: Praat's usual range for speech, men's and women's voices
SILENCE_BELOW_PEAK = 25.0  # dB under the loudest frame: quieter frames are silence
MIN_PAUSE = 0.15  # s: shorter dips are the closures of stops, not pauses
FINAL_FRAMES = 5  # the last 50 ms of voicing: the end of the final pitch movement
SYLLABLE_DIP = 2.0  # dB an intensity peak must stand above the dips beside it to count as a syllable nucleus


def _semitones(hi: float, lo: float) -> float:
    return 12.0 * math.log2(hi / lo) if hi > 0 and lo > 0 else 0.0


def _r(x: float, n: int = 2) -> float:
    return round(float(x), n)


def analyse(clip: Clip, words: list[dict] | None = None) -> dict:
    """The clip's prosody as a JSON-able dict (keys documented in speech.py's speech_features)."""
    import numpy as np
    import parselmouth
    from scipy.signal import find_peaks

    snd = parselmouth.Sound(clip.samples.astype(np.float64), sampling_frequency=clip.rate)
    pitch = snd.to_pitch(time_step=0.01, pitch_floor=PITCH_FLOOR, pitch_ceiling=PITCH_CEILING)
    f0 = pitch.selected_array["frequency"]
    f0_times = pitch.xs()
    intensity = snd.to_intensity(minimum_pitch=PITCH_FLOOR, time_step=0.01)
    db = intensity.values[0]
    db_times = intensity.xs()
    loud = db > db.max() - SILENCE_BELOW_PEAK
    out: dict = {"seconds": _r(clip.seconds, 3)}

    voiced = f0 > 0
    if voiced.any():
        v = f0[voiced]
        lo, hi = np.percentile(v, 5), np.percentile(v, 95)  # percentiles: one octave error does not set the range
        end = np.median(v[-FINAL_FRAMES:])  # where the voice ends up: a question's tune ends above the median
        contour = [_r(np.median(part), 1) for part in np.array_split(v, 5) if len(part)]
        out["pitch"] = {"median_hz": _r(np.median(v), 1), "mean_hz": _r(v.mean(), 1), "low_hz": _r(lo, 1),
                        "high_hz": _r(hi, 1), "range_hz": _r(hi - lo, 1), "range_semitones": _r(_semitones(hi, lo)),
                        "final_change_semitones": _r(_semitones(end, np.median(v))),
                        "contour_hz": contour, "voiced_fraction": _r(voiced.mean())}
    else:
        out["pitch"] = {"median_hz": None, "voiced_fraction": 0.0, "note": "no voiced speech found"}

    rms = float(np.sqrt(np.mean(clip.samples.astype(np.float64) ** 2)))
    out["energy"] = {"rms": _r(rms, 4), "rms_dbfs": _r(20 * math.log10(max(rms, 1e-10)), 1),
                     "mean_db": _r(db[loud].mean() if loud.any() else db.mean(), 1), "peak_db": _r(db.max(), 1)}

    # Pauses: quiet runs between the first and the last loud frame.
    step = float(db_times[1] - db_times[0]) if len(db_times) > 1 else 0.01
    idx = np.flatnonzero(loud)
    pauses: list[float] = []
    if len(idx):
        run = 0
        for q in ~loud[idx[0]:idx[-1] + 1]:
            if q:
                run += 1
            elif run:
                pauses.append(run * step)
                run = 0
        speech_start, speech_end = float(db_times[idx[0]]), float(db_times[idx[-1]])
    else:
        speech_start = speech_end = 0.0
    pauses = [p for p in pauses if p >= MIN_PAUSE]
    out["pauses"] = {"count": len(pauses), "total_seconds": _r(sum(pauses)),
                     "longest_seconds": _r(max(pauses, default=0.0)),
                     "speech_start": _r(speech_start), "speech_end": _r(speech_end)}

    # Syllable nuclei: intensity peaks that stand out, are loud enough, and fall in voiced frames.
    peaks, _ = find_peaks(db, prominence=SYLLABLE_DIP, height=db.max() - SILENCE_BELOW_PEAK)
    nuclei = [t for t in db_times[peaks] if math.isfinite(pitch.get_value_at_time(float(t)))]  # NaN: unvoiced
    speaking = max(speech_end - speech_start - sum(pauses), 1e-6)
    rate: dict = {"syllables": len(nuclei), "syllables_per_second": _r(len(nuclei) / speaking),
                  "speaking_seconds": _r(speaking)}
    if words:
        span = max(words[-1]["end"] - words[0]["start"], 1e-6)
        rate.update(words=len(words), words_per_second=_r(len(words) / span), source="transcript word times")
    else:
        rate["source"] = "intensity peaks (no transcript)"
    out["rate"] = rate
    if words:
        out["words"] = _prominence(words, f0, f0_times, db, db_times)
        if out["words"]:
            out["stressed_word"] = max(out["words"], key=lambda w: w["prominence"])["word"]
    return out


def _prominence(words: list[dict], f0, f0_times, db, db_times) -> list[dict]:
    """Each word's median pitch, peak loudness and length, and a prominence: the sum of the three as z-scores
    over the clip's words (stress raises all three in English)."""
    import numpy as np

    rows = []
    for w in words:
        in_word = (f0_times >= w["start"]) & (f0_times <= w["end"]) & (f0 > 0)
        in_db = (db_times >= w["start"]) & (db_times <= w["end"])
        rows.append({"word": w["word"], "pitch_hz": _r(np.median(f0[in_word]), 1) if in_word.any() else None,
                     "peak_db": _r(db[in_db].max(), 1) if in_db.any() else None,
                     "seconds": _r(w["end"] - w["start"], 3)})

    def z(key: str) -> list[float]:
        vals = np.array([r[key] if r[key] is not None else np.nan for r in rows], dtype=float)
        if np.all(np.isnan(vals)):
            return [0.0] * len(rows)
        sd = np.nanstd(vals) or 1.0
        return list(np.nan_to_num((vals - np.nanmean(vals)) / sd))

    for r, a, b, c in zip(rows, z("pitch_hz"), z("peak_db"), z("seconds"), strict=True):
        r["prominence"] = _r(a + b + c)
    return rows
