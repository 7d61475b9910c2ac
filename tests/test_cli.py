"""The CLI as a user runs it: subprocesses, real store, exit codes and output shapes."""

import json
import os
import subprocess
import sys

from conftest import ROOT, toolpath_cli, write


def scripted_task(tmp_path, responses, **extra):
    write(tmp_path / "r.yaml", responses)
    lines = ["id: cli-task", "instruction: What is (17 + 4) * 3?", f"model: scripted:{tmp_path / 'r.yaml'}",
             "evaluator: {name: numeric, expected: 63}"] + [f"{k}: {v}" for k, v in extra.items()]
    return write(tmp_path / "task.yaml", "\n".join(lines) + "\n")


GOOD = """
- '<tool_call>{"name": "calculator", "arguments": {"expression": "(17 + 4) * 3"}}</tool_call>'
- '<tool_call>{"name": "final_answer", "arguments": {"answer": "63"}}</tool_call>'
"""


def test_run_json_prints_exactly_one_object(tmp_path, home):
    r = toolpath_cli("run", scripted_task(tmp_path, GOOD), "--json", home=home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)  # the whole of stdout is one JSON document
    assert set(out) == {"run_id", "status", "answer", "steps", "tokens", "seconds", "score"}
    assert (out["status"], out["answer"], out["steps"], out["score"]) == ("finished", "63", 2, 1.0)
    assert out["tokens"] > 0
    assert "step   1" in r.stderr and "calculator" in r.stderr  # progress goes to stderr


def test_run_human_output_and_runs_show(tmp_path, home):
    r = toolpath_cli("run", scripted_task(tmp_path, GOOD), home=home)
    assert r.returncode == 0
    assert "finished: 63" in r.stdout and "score 1" in r.stdout
    run_id = r.stdout.split("run ")[1].split()[0]
    listing = toolpath_cli("runs", "list", home=home)
    assert run_id in listing.stdout and "finished" in listing.stdout
    shown = toolpath_cli("runs", "show", run_id[:17], home=home)
    assert shown.returncode == 0
    for want in ("call calculator", "observation from calculator: 63", "output: <tool_call>", "tokens", "ms"):
        assert want in shown.stdout, want
    data = json.loads(toolpath_cli("runs", "show", run_id, "--json", home=home).stdout)
    assert [s["node"] for s in data["steps"]] == ["task", "policy", "tools", "policy", "tools"]
    assert data["run"]["spec"]["id"] == "cli-task"


def test_exit_1_when_the_budget_runs_out(tmp_path, home):
    loop = "\n".join(f"- '<tool_call>{{\"name\": \"calculator\", "
                     f"\"arguments\": {{\"expression\": \"{i}+1\"}}}}</tool_call>'"
                     for i in range(5))
    r = toolpath_cli("run", scripted_task(tmp_path, loop), "--max-steps", "2", "--json", home=home)
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["status"] == "budget_exhausted" and out["steps"] == 2 and out["score"] == 0.0


def test_exit_2_for_bad_input(tmp_path, home):
    assert toolpath_cli("run", tmp_path / "missing.yaml", home=home).returncode == 2
    assert toolpath_cli("resume", "no-such-run", home=home).returncode == 2
    assert toolpath_cli("runs", "show", "nope", home=home).returncode == 2
    r = toolpath_cli("run", scripted_task(tmp_path, GOOD, tools="[warp]"), home=home)
    assert r.returncode == 2 and "unknown tool 'warp'" in r.stderr and "Traceback" not in r.stderr
    r = toolpath_cli("run", scripted_task(tmp_path, "just: a mapping"), home=home)
    assert r.returncode == 2 and "expected a YAML list" in r.stderr


def test_tools_commands(home):
    listing = toolpath_cli("tools", "list", home=home)
    assert all(n in listing.stdout for n in ("calculator", "read_file", "final_answer"))
    schema = json.loads(toolpath_cli("tools", "show", "calculator", home=home).stdout)
    assert schema["parameters"]["required"] == ["expression"]
    call = toolpath_cli("tools", "call", "calculator", "--arg", "expression=6*7", home=home)
    assert call.returncode == 0 and call.stdout.strip() == "42"
    bad = toolpath_cli("tools", "call", "calculator", "--arg", "nope=1", home=home)
    assert bad.returncode == 2 and "unknown argument" in bad.stderr
    fail = toolpath_cli("tools", "call", "calculator", "--arg", "expression=1/0", home=home)
    assert fail.returncode == 1 and "division by zero" in fail.stderr
    assert toolpath_cli("tools", "show", "warp", home=home).returncode == 2


def test_models_list_says_what_runs_here(home):
    r = toolpath_cli("models", "list", "--json", home=home, env={"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""})
    rows = {k["kind"]: k for k in json.loads(r.stdout)}
    assert set(rows) == {"local", "hf", "openai", "scripted", "python", "ocr-grounder", "dom", "oracle", "detector"}
    assert rows["openai"]["available"] is False and "OPENAI_BASE_URL" in rows["openai"]["reason"]
    assert rows["scripted"]["available"] is True


def test_eval_runs_scores_and_stores_each_sample(home):
    r = toolpath_cli("eval", "arith", "--limit", "5", "--model", "python:helpers:ArithPolicy", "--json", home=home,
                     env={"PYTHONPATH": str(ROOT / "tests") + ":" + str(ROOT)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"eval_id", "benchmark", "n", "score", "scoring", "scores", "by_category", "tokens", "seconds",
                        "cost_usd", "unpriced", "retries", "timed_out", "closeness"}
    assert out["closeness"] == {"runs": 5, "mean": 1.0, "closed": 1.0}  # every calculator result used
    assert out["scoring"] == "toolpath" and out["scores"] == {"toolpath": 1.0, "official": 1.0}
    assert out["n"] == 5 and out["score"] == 1.0
    assert set(out["by_category"]) == {"add", "sub", "mul", "div", "mixed"}
    from toolpath.runs import Store

    s = Store(home)
    samples = s.eval_samples(out["eval_id"])
    assert len(samples) == 5 and all(x["score"] == 1.0 and x["run_id"] for x in samples)
    assert len(s.list_runs(eval_id=out["eval_id"])) == 5


def test_eval_table_and_bad_benchmark(home):
    r = toolpath_cli("eval", "arith", "--limit", "2", "--model", "python:helpers:ArithPolicy", home=home,
                     env={"PYTHONPATH": str(ROOT / "tests") + ":" + str(ROOT)})
    assert r.returncode == 0 and "CATEGORY" in r.stdout and "all" in r.stdout
    bad = toolpath_cli("eval", "nope", home=home)
    assert bad.returncode == 2 and "available: arith" in bad.stderr


def test_help_and_tools_list_import_no_heavy_library(home):
    code = ("import sys; from toolpath.cli import main\n"
            "for argv in (['--help'], ['tools', 'list']):\n"
            "    try: main(argv)\n"
            "    except SystemExit: pass\n"
            "heavy = [m for m in ('torch', 'transformers', 'langgraph', 'playwright', 'open3d', 'ray', 'diffusers',"
            " 'numpy') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={"TOOLPATH_HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr


# What a hostile model might print: set the terminal's title (OSC), clear the screen (CSI), a C1 CSI, and a
# right-to-left override that makes "exe.png" read as "gnp.exe".
EVIL = "\x1b]0;TITLE\x07\x1b[2J\x9b31m \u202egnp.exe\r"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def assert_no_raw_controls(text: str, where: str):
    assert not any(c in text for c in RAW), f"{where}: {text[:300]!r}"


def test_model_text_cannot_drive_the_terminal(tmp_path, home):
    import yaml

    call = json.dumps({"name": "final_answer", "arguments": {"answer": "done " + EVIL}})
    write(tmp_path / "r.yaml", yaml.safe_dump([f"thinking {EVIL} <tool_call>{call}</tool_call>"]))
    task = write(tmp_path / "task.yaml", f"id: evil\ninstruction: hi\nmodel: scripted:{tmp_path / 'r.yaml'}\n")
    run = toolpath_cli("run", task, home=home)
    assert run.returncode == 0, run.stderr
    shown = toolpath_cli("runs", "show", run.stdout.split("run ")[1].split()[0], home=home)
    listing = toolpath_cli("runs", "list", home=home)
    for name, text in (("run stdout", run.stdout), ("progress", run.stderr), ("runs show", shown.stdout),
                       ("runs list", listing.stdout)):
        assert_no_raw_controls(text, name)
    assert "\\x1b]0;TITLE\\x07\\x1b[2J\\x9b31m \\u202egnp.exe\\x0d" in run.stdout  # shown, escaped
    assert "output: thinking \\x1b]0;TITLE" in shown.stdout and "answer: done \\x1b]0;TITLE" in shown.stdout
    assert "done \\x1b]0;TITLE" in listing.stdout
    as_json = toolpath_cli("runs", "show", run.stdout.split("run ")[1].split()[0], "--json", home=home).stdout
    assert_no_raw_controls(as_json, "runs show --json")
    assert json.loads(as_json)["run"]["answer"] == "done " + EVIL  # JSON escapes give back the exact text
    assert json.loads(toolpath_cli("run", task, "--json", home=home).stdout)["answer"] == "done " + EVIL


def test_eval_progress_lines_escape_model_answers(tmp_path, home):
    write(tmp_path / "evil_policy.py", f"""
from toolpath.policies.base import Response
from toolpath.state import ToolCall


class Evil:
    name = "python:evil"

    def __init__(self, spec=None):
        pass

    def respond(self, messages, tools, **gen):
        return Response(text="", tool_calls=[ToolCall(id="c1", name="final_answer",
                                                      arguments={{"answer": {EVIL!r}}})])
""")
    r = toolpath_cli("eval", "arith", "--limit", "2", "--model", "python:evil_policy:Evil", home=home,
                     env={"PYTHONPATH": str(tmp_path) + ":" + str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert "answer: \\x1b]0;TITLE" in r.stderr
    for name, text in (("eval progress", r.stderr), ("eval table", r.stdout),
                       ("eval list", toolpath_cli("eval", "list", home=home).stdout)):
        assert_no_raw_controls(text, name)


def test_secrets_are_redacted_from_what_the_cli_prints(tmp_path, home):
    secret = "sk-printed-secret-0123456789"
    call = json.dumps({"name": "final_answer", "arguments": {"answer": f"the key is {secret}"}})
    write(tmp_path / "r.yaml", f"- '<tool_call>{call}</tool_call>'\n")
    task = write(tmp_path / "task.yaml", f"id: leak\ninstruction: hi\nmodel: scripted:{tmp_path / 'r.yaml'}\n")
    env = {"OPENAI_API_KEY": secret}
    run = toolpath_cli("run", task, home=home, env=env)
    assert run.returncode == 0, run.stderr
    run_id = run.stdout.split("run ")[1].split()[0]
    outputs = [run.stdout, run.stderr, toolpath_cli("runs", "list", home=home, env=env).stdout,
               toolpath_cli("runs", "show", run_id, home=home, env=env).stdout,
               toolpath_cli("runs", "show", run_id, "--json", home=home, env=env).stdout,
               toolpath_cli("run", task, "--json", home=home, env=env).stdout]
    assert all(secret not in text for text in outputs)
    assert "the key is [redacted]" in outputs[0]


def test_empty_agent_override_is_bad_input(tmp_path, home):
    task = scripted_task(tmp_path, GOOD)
    r = toolpath_cli("run", task, "--agent", "", home=home)  # --model '' is among the hostile specs
    assert r.returncode == 2 and "agent.name" in r.stderr and str(task) in r.stderr, r.stderr


def test_a_plugin_that_cannot_load_is_named_not_a_traceback(tmp_path):
    for args, plugin in ((("tools", "list"), "no_such_toolpath_plugin"),
                         (("run", "examples/hello.yaml", "--model", "mine"),
                          "policy:mine=no_such_toolpath_plugin:make")):
        r = toolpath_cli(*args, home=tmp_path / "home", env={"TOOLPATH_PLUGINS": plugin})
        assert r.returncode == 2, r.stderr
        assert "no_such_toolpath_plugin" in r.stderr and "TOOLPATH_PLUGINS" in r.stderr
        assert "Traceback" not in r.stderr


def test_a_policy_kind_a_plugin_adds_runs_a_task(tmp_path):
    write(tmp_path / "plug" / "echo_policy.py", (
        "from toolpath.policies.base import Response\n\n\n"
        "class Echo:\n    name = 'echo'\n\n"
        "    def __init__(self, spec):\n        self.spec = spec\n\n"
        "    def respond(self, messages, tools, **generation):\n"
        "        return Response(text='echo: ' + messages[-1].content)\n"))
    env = {"TOOLPATH_PLUGINS": "policy:echo=echo_policy:Echo",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path / "plug"), os.environ.get("PYTHONPATH", "")])}
    listed = toolpath_cli("models", "list", home=tmp_path / "home", env=env)
    assert listed.returncode == 0 and "echo" in listed.stdout
    r = toolpath_cli("run", "examples/hello.yaml", "--model", "echo", "--json", home=tmp_path / "home", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"].startswith("echo: What is 2 + 3?")
