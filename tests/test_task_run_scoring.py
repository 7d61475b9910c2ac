"""A single task's run scored after it ends (evals/scoring.py, what `toolpath run` and `resume` call): by its
spec's evaluator, the value kept on the run; a benchmark that scores the world's final state left to
`toolpath eval`; an evaluator nothing scores refused before the run."""

from toolpath.evals.scoring import known_evaluators, score_task_run, unknown_evaluator
from toolpath.spec import TaskSpec


def spec(evaluator=None) -> TaskSpec:
    data = {"id": "t", "instruction": "What is 21 * 3?", "model": "scripted:r.yaml"}
    return TaskSpec.model_validate({**data, "evaluator": evaluator} if evaluator else data)


def new_run(store, task: TaskSpec) -> str:
    return store.create_run(task.model_dump_json(), task.id, "scripted", "react")


def test_the_answer_is_scored_and_kept_on_the_run(store):
    task = spec({"name": "numeric", "expected": 63})
    run = new_run(store, task)
    assert score_task_run(store, run, task, "63") == (1.0, None)
    assert store.get_run(run)["score"] == 1.0
    wrong = new_run(store, task)
    assert score_task_run(store, wrong, task, "64") == (0.0, None) and store.get_run(wrong)["score"] == 0.0


def test_no_evaluator_scores_nothing(store):
    task = spec()
    run = new_run(store, task)
    assert score_task_run(store, run, task, "63") == (None, None) and store.get_run(run)["score"] is None


def test_a_final_state_benchmark_is_left_to_toolpath_eval(store):
    task = spec({"name": "webarena"})
    run = new_run(store, task)
    value, note = score_task_run(store, run, task, "done")
    assert value is None and "scored by its benchmark (toolpath eval)" in note
    assert store.get_run(run)["score"] is None


def test_an_evaluator_nothing_scores_is_named_with_the_known_ones():
    assert unknown_evaluator(spec()) is None and unknown_evaluator(spec({"name": "numeric"})) is None
    assert known_evaluators()["webarena"] == "benchmark" and unknown_evaluator(spec({"name": "webarena"})) is None
    problem = unknown_evaluator(spec({"name": "numerik"}))
    assert problem.startswith("unknown evaluator 'numerik'; expected one of ") and "numeric" in problem
