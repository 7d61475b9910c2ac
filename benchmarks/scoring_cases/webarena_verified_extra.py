"""Adversarial WebArena-Verified cases for the value types whose reading leans on other libraries: durations,
distances, coordinates, location names, git URLs, amounts, numbers (in words too), months, dates, nulls, and
strings with non-ASCII letters, quotes and dashes. Each case is a real task's AgentResponseEvaluator config (or
a small made-up one, "x-…") with one retrieved value replaced. Imported by webarena_cases.py.
"""

from __future__ import annotations

import copy

_ANSWERS = {
    "duration": ["7min", "7 min", "7 minutes", "7 mins", "7m", "7min.", '"7min"', "7 Minutes", "7 MIN", "0:07",
                 "00:07:00", "7:00", "420s", "420 seconds", "420", 420, 7, "seven minutes", "about 7 min",
                 "~7 min", "7 min (driving)", "7-min", "7–8 min", "0.12 hours", "0.1167h", "7min 30s", "10 min",
                 "10min 1s", "11 min", "4 min", "3 min", "1 hr 35 min", "1:35 hours", "1h35m", "95 min", "1.5h",
                 "1 hour", "PT7M", "7′", "7 min walk", "", None, "N/A", [7, "min"], {"minutes": 7}, True],
    "duration-long": ["5h 47min", "5 h 47 min", "5:47", "5:47:00", "05:47:00", "5 hours 47 minutes", "347 min",
                      "347min", "5.8 hours", "5.78h", "6h", "6 hours", "5h 20min", "5h 47min.", "5 hrs 47 mins",
                      "5h47", "5hr 47m", "5 hours and 47 minutes", "about 5 hours", "5:47 hours", "5,8 h",
                      "20820", "20820s", "1d", "5h 47 min driving"],
    "distance": ["748m", "748 m", "748 meters", "748 metres", "748 Meter", "0.748 km", "0.748km", "748m.", '"748m"',
                 "748", 748, "0.46 mi", "0.465 miles", "2454 ft", "2454 feet", "818 yards", "748 M", "about 748 m",
                 "748m (walking)", "~748m", "757m", "760 m", "0.75 km", "0.7 km", "748000 mm", "74800 cm",
                 "748 m walking", "seven hundred meters", "7.48e2 m", "2**3 km", "2**99999 km", "748 kg", "748 s",
                 "", None, "N/A", "748 m, 0.46 mi"],
    "distance-km": ["914km", "914 km", "914k", "914 K", "914 kilometers", "914 kilometres", "914,000 m",
                    "914000 m", "568 mi", "568 miles", "568 mile", "568mi", "914 km.", "900 km", "930 km", "896 km",
                    "1.7km", "1,7 km", "913.6 km", "9.14e5 m", "914 KM", "914 Km", "914 km by car", "about 914 km",
                    "914 km (568 mi)"],
    "coordinates": [{"latitude": "40.4424191", "longitude": "-79.9397388"},
                    {"lat": 40.4424191, "lon": -79.9397388}, {"lat": 40.4424191, "lng": -79.9397388},
                    {"Latitude": 40.4424191, "Longitude": -79.9397388}, {"la": 40.4424191, "lo": -79.9397388},
                    {"latitude": 40.44242, "longitude": -79.93974}, {"latitude": 40.4424, "longitude": -79.9397},
                    {"latitude": -79.9397388, "longitude": 40.4424191}, {"latitude": 40.4424191},
                    {"latitude": "abc", "longitude": "-79.9"}, {"latitude": 91, "longitude": -79.9},
                    {"latitude": 40.4424191, "longitude": 280.0602612}, {"x": 40.44, "y": -79.94},
                    [40.4424191, -79.9397388], ["40.4424191", "-79.9397388"], "40.4424191, -79.9397388",
                    "40.4424191,-79.9397388", "(40.4424191, -79.9397388)", "40.4424191 N, 79.9397388 W",
                    "40.4424191N 79.9397388W", "40°26'32.7\"N 79°56'23.1\"W", "40° 26′ 32.71″ N, 79° 56′ 23.06″ W",
                    "lat 40.4424191, lon -79.9397388", "40.4424191 -79.9397388", "40.4424191", "", None, 0,
                    "40.4424191, -79.9397388, 300m", "N/A"],
    "location-name": ["El Gallo de Oro", "el gallo de oro", "EL GALLO DE ORO", "El Gallo De Oro Restaurant",
                      "Gallo de Oro", "El Gallo d'Oro", "El_Gallo_de_Oro", "El-Gallo-de-Oro", "Oro de Gallo El",
                      "Café El Gallo de Oro", "The El Gallo de Oro", "El Gallo", "El Galo de Oro", "El Gallo de Oro.",
                      '"El Gallo de Oro"', "El Gallo de Oro (Pittsburgh)", "El Gallo de Oro, 5000 Forbes Ave",
                      "Gallo Oro", "...", "", 0, 5, None, "N/A", "El Gallo de Oro!!!", "el  gallo   de oro"],
    "location-name-2": ["Carnegie Mellon University", "Carnegie Mellon Univ", "CMU", "Carnegie-Mellon University",
                        "Carnegie Mellon", "University Carnegie Mellon", "Carnegie Melon University",
                        "Carnegie Mellon University, Pittsburgh", "carnegie mellon university."],
    "url": ["git@__SSH_HOST__:eriklindernoren/PyTorch-GAN.git", "git@__SSH_HOST__:eriklindernoren/pytorch-gan.git",
            "ssh://git@localhost:2222/eriklindernoren/PyTorch-GAN.git", "git@localhost:eriklindernoren/PyTorch-GAN.git",
            "GIT@HOST:ERIKLINDERNOREN/PYTORCH-GAN.GIT", "git@localhost:2222/eriklindernoren/PyTorch-GAN.git",
            "http://localhost:8023/eriklindernoren/PyTorch-GAN.git", "https://localhost:8023/eriklindernoren/PyTorch-GAN",
            "git@__SSH_HOST__:eriklindernoren/PyTorch-GAN.git/", "git@__SSH_HOST__:eriklindernoren/PyTorch-GAN",
            "  git@__SSH_HOST__:eriklindernoren/PyTorch-GAN.git  ", "^git@.*$", "^git@__SSH_HOST__:erik.*\\.git$",
            "git@__SSH_HOST__:eriklindernoren/PyTorch GAN.git", "ssh://localhost/eriklindernoren/PyTorch-GAN.git",
            "deploy@host:eriklindernoren/PyTorch-GAN.git", "eriklindernoren/PyTorch-GAN", "git@host", "", None, 5,
            "^[$"],
    "currency": ["$36.39", "36.39", 36.39, "36.39 USD", "USD 36.39", "$36.39.", "36,39 €", "€36,39", "£36.39",
                 "$ 36.39", "36.39 dollars", "thirty six dollars", "$36.4", "$36.3", "$36.49", "$36.50", "$36",
                 "-$36.39", "$-36.39", "(36.39)", "36.39$", "$0,036.39", "$3,639", "3639 cents", "about $36",
                 "$36.39 (incl. tax)", "36.390", "36,390", "1.036,39", "Total: $36.39", "", None, "free", True],
    "number": ["6", 6, 6.0, "6.0", "six", "Six", "SIX", "six items", "6 items", "6.", "#6", "06", "1,234",
               "1 234", "twenty-five", "twenty five", "one hundred and five", "three thousand", "a dozen",
               "one million two hundred", "zero", 0, "point five", "two point five", "nine hundred ninety nine",
               "VI", "6/1", "1e3", "six or seven", "", None, True, "inf", "½"],
    "month": ["March", "march", "Mar", "Mar.", "3", 3, "03", 3.0, 3.5, "March 2023", "2023-03", "03/2023",
              "Marzo", "Mär", "13", 0, "", None, "the third month"],
    "date": ["March 2, 2022", "March 2,2022", "2022-03-02", "03/02/2022", "2/3/2022", "2 March 2022",
             "Mar 2nd, 2022", "March 2nd 2022", "Wed, March 2, 2022", "2022/03/02", "20220302", 20220302,
             "March 2", "2022", "March 2, 2022 at 10:00 AM", "yesterday", "", None],
    "null": [None, "", "N/A", "n / a", "NULL", "none", "None.", "nan", "na", "n.a.", 0, False, [], {}, "not available",
             "  ", "-"],
    "string": ["Strasse", "Straße", "Æroport", "Aeroport", "Łódź", "Lodz", "Malmö", "Œuvre", "Macy’s", "Macy's",
               "“Quoted”", "10–20", "10—20", "A–B", "5 €", "5 EUR", "£5", "90°", "½ cup", "x²", "ﬁle", "Ｆｕｌｌ",
               "Tab\there", "Crème brûlée", "Ðorđe", "São Paulo", "İstanbul", "Ærø", "naïve café", "Москва",
               "東京", "Αθήνα", "a•b", "a·b", "…", "Quest Lumaflex™ Band", "Quest Lumaflex Band", "©2023",
               "«Bonjour»", "¿Qué?", "x × y", "ﬀ", "ǅ"],
}


def _answer(kind_ex: dict, value) -> dict:
    return {"task_type": kind_ex["task_type"].upper(), "status": kind_ex["status"], "retrieved_data": [value]}


def verified_extra(tasks: list[dict]) -> list[dict]:
    by_id = {t["task_id"]: next(c for c in t["eval"] if c["evaluator"] == "AgentResponseEvaluator") for t in tasks}
    picks = {"duration": 52, "duration-long": 137, "distance": 363, "distance-km": 97, "coordinates": 248,
             "location-name": 57, "location-name-2": 74, "url": 296, "currency": 94, "number": 11}
    cases = []
    for kind, task_id in picks.items():
        cfg = {k: v for k, v in copy.deepcopy(by_id[task_id]).items() if k != "evaluator"}
        want = cfg["expected"]["retrieved_data"]
        for i, value in enumerate(_ANSWERS[kind]):
            got = [value] + list(want[1:]) if len(want) > 1 and kind.startswith("location") else [value]
            answer = {**_answer(cfg["expected"], None), "retrieved_data": got}
            cases.append({"id": f"x-{kind}-{i}", "case": {"eval": cfg, "answer": answer}})
    # types whose tasks hold a value inside objects or that no task uses alone: made-up configs
    made_up = {"month": ("month", "March"), "date": ("date", "March 2, 2022"), "null": ("null", None)}
    for kind, (fmt, expected) in made_up.items():
        cfg = {"expected": {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [expected]},
               "results_schema": {"type": "array", "items": {"type": "string", "format": fmt}}, "ordered": False}
        if fmt == "null":
            cfg["results_schema"]["items"] = {"type": "null"}
        for i, value in enumerate(_ANSWERS[kind]):
            answer = _answer(cfg["expected"], value)
            cases.append({"id": f"x-{kind}-{i}", "case": {"eval": cfg, "answer": answer}})
    strings = _ANSWERS["string"]
    for i, expected in enumerate(strings):  # every pair of neighbours, both ways: transliteration checked
        for j, value in enumerate(strings[max(0, i - 1): i + 2]):
            cfg = {"expected": {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [expected]},
                   "results_schema": {"type": "array", "items": {"type": "string"}}, "ordered": False}
            cases.append({"id": f"x-string-{i}-{j}", "case": {"eval": cfg, "answer": _answer(cfg["expected"], value)}})
    # one character at a time: "a <c> b" expected, "a <our transliteration of c> b" answered; the package
    # agrees only where unidecode spells c as we do
    from toolpath.evals.benchmarks.webarena_verified_values import TRANSLITERATIONS, ascii_fold

    chars = sorted(set(TRANSLITERATIONS) | {chr(c) for c in range(0xA0, 0x180)} | set("ΑαΩωΣσ東京"))
    for c in chars:
        cfg = {"expected": {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [f"a {c} b"]},
               "results_schema": {"type": "array", "items": {"type": "string"}}, "ordered": False}
        answer = _answer(cfg["expected"], f"a {ascii_fold(c)} b")
        cases.append({"id": f"x-char-{ord(c):04x}", "case": {"eval": cfg, "answer": answer}})
    return cases
