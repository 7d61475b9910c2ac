"""WebArena and its descendants: task configs → computer-use TaskSpecs on a browser, scored offline.

Variants (benchmark names), each a file or folder in the data folder:
  webarena                test.raw.json                 812 tasks (WebArena)
  webarena_lite           test_webarena_lite.raw.json   165 tasks (WebArena-Lite)
  webarena_lite_v2        webarena_lite_v2_tasks/       154 tasks (WebArena-Lite-v2, ScaleCUA's): the per-task
                                                         <id>.json files, as ScaleCUA's runner reads them (their
                                                         start_url differs from the folder's test.raw.json for 37
                                                         admin tasks); test.raw.json only when they are absent
  webarena_verified       webarena-verified.json        812 tasks (ServiceNow's webarena-verified schema); records
                                                         of the 258-task hard subset say so in data["hard"]
  webarena_verified_hard  webarena-verified-hard.json   258 tasks, their own (harder-checked) revision

Where the data is: `data=` (`toolpath eval webarena --data PATH`: the folder, or the variant's own file or
folder), else $TOOLPATH_WEBARENA_DATA (the folder); no default (SOURCE says where to get the configs).

The websites are the user's own WebArena deployment (the Docker images): their base URLs come from the
environment variables WebArena itself uses, SHOPPING, SHOPPING_ADMIN, REDDIT, GITLAB, MAP, WIKIPEDIA, HOMEPAGE
(e.g. SHOPPING_ADMIN=http://localhost:7780/admin), and replace the configs' __SHOPPING__ … placeholders.
No address is ever guessed: `to_task` raises BenchmarkDataError for a task whose site has no URL set,
naming the variables to set. To run a subset of sites, set TOOLPATH_WEBARENA_SITES (e.g. "shopping,gitlab"):
records() then keeps only the tasks all of whose sites are listed, and says how many it left out.
webarena-verified's __SSH_HOST__ (git clone URLs) is $SSH_HOST, else the host name of GITLAB.

Out of scope: logging in. WebArena starts each task from a saved login (storage_state, .auth/*.json made by
its auto_login script against the live sites) and resets sites between tasks (require_reset); neither is
done here: point the browser at a deployment whose sessions and state you manage.

Scoring (webarena_eval.py): the runner calls `score_final(record, answer, final_state)` with the browser's
final state (its URL and the probes the spec asked for); `score(record, answer)` scores answer-only tasks and
gives 0 to the rest. `evaluate()` returns the per-evaluator details. `scoring` ("toolpath" or "official", see
webarena_eval.evaluate) picks the published evaluators, bugs included, or a careful grader's reading.
fuzzy_match uses the judge policy $TOOLPATH_WEBARENA_JUDGE (a model spec such as openai:gpt-4.1-mini) or `judge=`;
without one, fuzzy items are unscorable. Anything unscorable scores 0 and is logged with the reason.
WebArena-Verified's official scores are those of the package's release `release=` names, else
$TOOLPATH_WEBARENA_VERIFIED_RELEASE, else the current one (1.2.3; 1.0.0 keeps its two bugs, see
webarena_verified_official); every WebArena-Verified score carries the metric "scorer:webarena-verified
<release>" (1.0 per sample, so an eval's figure is the share each release scored) and each task spec the release
in its evaluator options.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ...spec import TaskSpec
from . import Benchmark, BenchmarkDataError, Record, Score, data_path, pick, read_json, require, task_id, webarena_eval
from .webarena_probes import probes_for
from .webarena_verified_official import CURRENT, check_release

log = logging.getLogger(__name__)

DATA_ENV, SITES_ENV, JUDGE_ENV = "TOOLPATH_WEBARENA_DATA", "TOOLPATH_WEBARENA_SITES", "TOOLPATH_WEBARENA_JUDGE"
RELEASE_ENV = "TOOLPATH_WEBARENA_VERIFIED_RELEASE"
SOURCE = "the WebArena repository's config_files (and WebArena-Lite / WebArena-Verified releases)"

# placeholder → the environment variable (WebArena's own names) that holds its base URL
PLACEHOLDER_VARS = {"__SHOPPING__": "SHOPPING", "__SHOPPING_ADMIN__": "SHOPPING_ADMIN", "__REDDIT__": "REDDIT",
                    "__GITLAB__": "GITLAB", "__MAP__": "MAP", "__WIKIPEDIA__": "WIKIPEDIA",
                    "__HOMEPAGE__": "HOMEPAGE"}
SITE_VARS = {"shopping": "SHOPPING", "shopping_admin": "SHOPPING_ADMIN", "reddit": "REDDIT", "gitlab": "GITLAB",
             "map": "MAP", "wikipedia": "WIKIPEDIA", "homepage": "HOMEPAGE"}
_PLACEHOLDER = re.compile(r"__(SHOPPING_ADMIN|SHOPPING|REDDIT|GITLAB|MAP|WIKIPEDIA|HOMEPAGE|SSH_HOST)__")

VARIANTS = {  # name: (file or folder in the data folder, schema, description)
    "webarena": ("test.raw.json", "webarena", "WebArena: 812 tasks on five self-hosted websites"),
    "webarena_lite": ("test_webarena_lite.raw.json", "webarena", "WebArena-Lite: 165 tasks"),
    "webarena_lite_v2": ("webarena_lite_v2_tasks", "webarena", "WebArena-Lite-v2 (ScaleCUA): 154 tasks"),
    "webarena_verified": ("webarena-verified.json", "verified", "WebArena-Verified: 812 re-audited tasks"),
    "webarena_verified_hard": ("webarena-verified-hard.json", "verified", "WebArena-Verified Hard: 258 tasks"),
}
HARD_FILE = "webarena-verified-hard.json"

VERIFIED_FORMAT = (
    "When you finish, give your final answer as one JSON object: {\"task_type\": \"RETRIEVE\" | \"MUTATE\" | "
    "\"NAVIGATE\", \"status\": \"SUCCESS\" | \"NOT_FOUND_ERROR\" | \"ACTION_NOT_ALLOWED_ERROR\" | "
    "\"PERMISSION_DENIED_ERROR\" | \"DATA_VALIDATION_ERROR\" | \"UNKNOWN_ERROR\", \"retrieved_data\": [the items "
    "asked for] for RETRIEVE tasks or null, \"error_details\": null or why it failed}.")


def site_urls(env: dict | None = None) -> dict[str, str]:
    """placeholder → base URL (no trailing slash), for the variables that are set."""
    env = os.environ if env is None else env
    out = {ph: env[var].strip().rstrip("/") for ph, var in PLACEHOLDER_VARS.items() if env.get(var, "").strip()}
    ssh = env.get("SSH_HOST", "").strip() or (urlparse(out["__GITLAB__"]).hostname if "__GITLAB__" in out else "")
    if ssh:
        out["__SSH_HOST__"] = ssh
    return out


def map_placeholders(value: Any, urls: dict[str, str]) -> Any:
    """`value` (str, list, dict, nested) with every known placeholder replaced by its base URL."""
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: urls.get(m.group(0), m.group(0)), value)
    if isinstance(value, list):
        return [map_placeholders(v, urls) for v in value]
    if isinstance(value, dict):
        return {k: map_placeholders(v, urls) for k, v in value.items()}
    return value


def _placeholders(value: Any) -> set[str]:
    return {f"__{name}__" for name in _PLACEHOLDER.findall(json.dumps(value))}


def start_urls(config: dict) -> list[str]:
    """The pages a task starts on: webarena-verified's start_urls, or WebArena's start_url (" |AND| " = tabs)."""
    if isinstance(config.get("start_urls"), list):
        return [str(u) for u in config["start_urls"]]
    return [u.strip() for u in str(config.get("start_url", "")).split(" |AND| ") if u.strip()]


def _problem(item: Any, schema: str) -> str | None:
    if not isinstance(item, dict):
        return f"expected a JSON object, got {type(item).__name__}"
    need = ["task_id", "intent", "sites", "eval"] + (["start_urls"] if schema == "verified" else ["start_url"])
    missing = [k for k in need if k not in item]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if not isinstance(item["task_id"], int):
        return f"task_id: expected an integer, got {item['task_id']!r}"
    if not isinstance(item["intent"], str) or not item["intent"].strip():
        return "intent: expected a non-empty string"
    if not isinstance(item["sites"], list) or not item["sites"] or not all(s in SITE_VARS for s in item["sites"]):
        return f"sites: expected a non-empty list of {', '.join(SITE_VARS)}, got {item['sites']!r}"
    ev = item["eval"]
    if schema == "verified":
        if not isinstance(ev, list) or not all(isinstance(c, dict) and "evaluator" in c for c in ev):
            return "eval: expected a list of {\"evaluator\": …} objects (webarena-verified schema)"
    else:
        if not isinstance(ev, dict) or not isinstance(ev.get("eval_types"), list) or not ev["eval_types"]:
            return "eval: expected an object with a non-empty eval_types list"
        unknown = set(ev["eval_types"]) - {"string_match", "url_match", "program_html"}
        if unknown:
            return f"eval.eval_types: unknown {sorted(unknown)}"
    return None


def read_configs(path: Path, schema: str) -> list[tuple[str, dict]]:
    """(where, config) for every task in a config file, or in a folder of per-task <id>.json files.

    Raises BenchmarkDataError naming the file (and list index) of the first bad task or a repeated task_id."""
    if path.is_dir():
        files = sorted((p for p in path.glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
        if files:
            items = [(str(p), read_json(p, "WebArena task file")) for p in files]
        elif (path / "test.raw.json").is_file():
            return read_configs(path / "test.raw.json", schema)
        else:
            raise BenchmarkDataError(f"{path}: no <task_id>.json files and no test.raw.json in the folder")
    else:
        data = read_json(path, "WebArena task file")
        if not isinstance(data, list):
            raise BenchmarkDataError(f"{path}: expected a JSON list of task configs, got {type(data).__name__}")
        items = [(f"{path}[{i}]", item) for i, item in enumerate(data)]
    seen: dict[int, str] = {}
    for where, item in items:
        problem = _problem(item, schema)
        if problem:
            raise BenchmarkDataError(f"{where}: {problem}")
        if item["task_id"] in seen:
            raise BenchmarkDataError(f"{where}: task_id {item['task_id']} repeats {seen[item['task_id']]}")
        seen[item["task_id"]] = where
    if not items:
        raise BenchmarkDataError(f"{path}: no tasks")
    return items


class WebArena(Benchmark):
    """One class for every variant; the subclasses below fix `variant` (their registry names)."""

    variant = "webarena"
    name = "webarena"
    description = VARIANTS["webarena"][2]
    scores_final_state = True

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.name, cls.description = cls.variant, VARIANTS[cls.variant][2]

    def __init__(self, data: Path | str | None = None, variant: str | None = None, judge: Any = None,
                 sites: Iterable[str] | None = None, env: dict | None = None, release: str | None = None):
        self.variant = variant or self.variant
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown WebArena variant {self.variant!r}; expected one of {', '.join(VARIANTS)}")
        entry, self.schema, self.description = VARIANTS[self.variant]
        self.name = self.variant
        root = data_path(DATA_ENV, data)
        # --data may name the folder or the variant's own file/folder
        self.root = root if root is None or (root / entry).exists() or not root.exists() else root.parent
        self.path = root if root is None else root / entry if (root / entry).exists() or not root.exists() else root
        self._judge, self.env = judge, env
        chosen = (sites if sites is not None
                  else [s for s in os.environ.get(SITES_ENV, "").replace(" ", "").split(",") if s])
        self.sites = set(chosen)
        unknown = self.sites - set(SITE_VARS)
        if unknown:
            raise BenchmarkDataError(f"{SITES_ENV}: unknown site(s) {', '.join(sorted(unknown))}; "
                                     f"expected some of {', '.join(SITE_VARS)}")
        given = release if release is not None else os.environ.get(RELEASE_ENV, "").strip() or None
        try:  # WebArena's own schema has no releases: the setting is WebArena-Verified's only
            self.release = check_release(given or CURRENT, "release=" if release is not None else RELEASE_ENV) \
                if self.schema == "verified" else CURRENT
        except ValueError as err:
            raise BenchmarkDataError(str(err)) from None

    # ---- records -----------------------------------------------------------------------------------------
    def _hard_ids(self) -> set[int]:
        hard = self.root / HARD_FILE
        if self.variant != "webarena_verified" or not hard.is_file():
            return set()
        return {c["task_id"] for _, c in read_configs(hard, "verified")}

    def all_records(self) -> list[Record]:
        path = require(self.path, DATA_ENV, f"{self.variant} task configs", SOURCE)
        hard = self._hard_ids()
        out = []
        for where, config in read_configs(path, self.schema):
            data = {"config": config, "source": where, "variant": self.variant}
            if hard:
                data["hard"] = config["task_id"] in hard
            out.append(Record(id=f"{self.variant}-{config['task_id']}", category="+".join(sorted(config["sites"])),
                              data=data))
        return out

    def records(self, limit: int | None = None, seed: int = 0) -> list[Record]:
        recs = self.all_records()
        if self.sites:
            kept = [r for r in recs if set(r.data["config"]["sites"]) <= self.sites]
            log.warning("%s: %s=%s keeps %d of %d tasks (those on these sites only)", self.variant, SITES_ENV,
                        ",".join(sorted(self.sites)), len(kept), len(recs))
            recs = kept
        return pick(recs, limit, seed)

    # ---- tasks -------------------------------------------------------------------------------------------
    def urls_for(self, record: Record) -> dict[str, str]:
        """The base URLs the task needs, or BenchmarkDataError naming the variables that are not set."""
        config = record.data["config"]
        urls = site_urls(self.env)
        needed = {f"__{SITE_VARS[s]}__" for s in config["sites"]} | (_placeholders(config) - {"__SSH_HOST__"})
        missing = sorted(PLACEHOLDER_VARS[p] for p in needed if p not in urls)
        if missing:
            raise BenchmarkDataError(
                f"{record.id} ({record.data['source']}): the base URL of its site(s) is not set: set "
                f"{', '.join(missing)} to your WebArena deployment (e.g. {missing[0]}=http://localhost:PORT)"
                + (f", or restrict the run with {SITES_ENV}" if not self.sites else ""))
        return urls

    def eval_block(self, record: Record) -> Any:
        return map_placeholders(record.data["config"]["eval"], self.urls_for(record))

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        config = record.data["config"]
        urls = self.urls_for(record)
        starts = [map_placeholders(u, urls) for u in start_urls(config)]
        hosts = sorted({urlparse(urls[f"__{SITE_VARS[s]}__"]).hostname for s in config["sites"]} |
                       {urlparse(u).hostname for u in starts if urlparse(u).hostname})
        block = map_placeholders(config["eval"], urls)
        instruction = config["intent"].strip()
        if len(starts) > 1:  # WebArena opens these as tabs; one page here, so name the others
            instruction += "\n\nThe task also concerns these pages: " + ", ".join(starts[1:])
        if self.schema == "verified":
            instruction += "\n\n" + VERIFIED_FORMAT
        spec = {
            "id": task_id(record.id),
            "instruction": instruction,
            "agent": {"name": "computer_use", "params": {"platform": "web", "mode": "direct"}},
            "model": model or "dom",
            "sandbox": {"kind": "browser", "options": {"start_url": starts[0] if starts else urls[
                f"__{SITE_VARS[config['sites'][0]]}__"], "allowed_hosts": hosts}},
            "limits": {"max_steps": 30},
            "evaluator": {"name": "webarena", "options": {"eval": block, "probes": probes_for(block),
                                                          "scoring": self.scoring,
                                                          **({"release": self.release} if self.schema == "verified"
                                                             else {})}},
            "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id,
                         "task_id": config["task_id"], "sites": config["sites"],
                         "eval_types": webarena_eval.eval_types(config["eval"]),
                         **({"hard": record.data["hard"]} if "hard" in record.data else {})},
        }
        return TaskSpec.model_validate(spec)

    # ---- scoring -----------------------------------------------------------------------------------------
    def judge(self):
        """The fuzzy_match judge: `judge=` (a Policy or model spec string), else $TOOLPATH_WEBARENA_JUDGE, else None."""
        if self._judge is None:
            spec = os.environ.get(JUDGE_ENV, "").strip()
            if not spec:
                return None
            self._judge = spec
        if isinstance(self._judge, str):
            from ...policies.base import load

            self._judge = load(self._judge)
        return self._judge

    def evaluate(self, record: Record, answer: str | None, final_state: dict | None = None) -> dict:
        """Per-evaluator details (see webarena_eval.evaluate); "score" is None when something was unscorable."""
        return webarena_eval.evaluate(self.eval_block(record), answer, final_state,
                                      intent=record.data["config"]["intent"], judge=self.judge(), scoring=self.scoring,
                                      release=self.release)

    def score_final(self, record: Record, answer: str | None, final_state: dict | None) -> Score:
        result = self.evaluate(record, answer, final_state)
        # The official score of this sample (its own, or the one stored beside it) came from this release.
        scorer = {f"scorer:webarena-verified {self.release}": 1.0} if self.schema == "verified" else {}
        if result["score"] is None:
            log.warning("%s: unscorable, counted as 0: %s", record.id, result["unscorable"])
            return Score(0.0, scorer, explanation=f"unscorable: {result['unscorable']}")
        return Score(float(result["score"]), scorer)

    def score(self, record: Record, answer: str | None) -> Score:
        """Without the browser's final state: answer-only tasks are scored, the others get 0."""
        return self.score_final(record, answer, None)


class WebArenaLite(WebArena):
    variant = "webarena_lite"


class WebArenaLiteV2(WebArena):
    variant = "webarena_lite_v2"


class WebArenaVerified(WebArena):
    variant = "webarena_verified"


class WebArenaVerifiedHard(WebArena):
    variant = "webarena_verified_hard"
