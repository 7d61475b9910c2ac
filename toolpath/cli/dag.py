"""`toolpath dag check FILE`: a DAG-MATH trajectory against the format's rules, every violation named.

Exit 0 when the trajectory is valid (closed or not: closure is reported, not required), 1 when it breaks a rule,
2 when the file cannot be read as a trajectory at all (missing, not UTF-8, not JSON: the file, line and column).
"""

from __future__ import annotations

from pathlib import Path

from .common import EXIT_FAILED, EXIT_OK, BadInput, echo, echo_json, one_line


def _read(path: Path) -> str:
    from ..evals.dag.reader import MAX_CHARS

    try:
        if path.exists() and not path.is_file():  # a folder, or a FIFO or device that reading would wait on
            raise BadInput(f"dag check: {path} is not a regular file; give the trajectory's JSON file")
        with path.open("rb") as f:
            data = f.read(MAX_CHARS * 4 + 1)  # a UTF-8 character is at most 4 bytes
        return data.decode("utf-8")
    except OSError as err:
        raise BadInput(f"dag check: cannot read {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise BadInput(f"dag check: {path} is not UTF-8 text (byte {err.start})") from None


def cmd_dag_check(args) -> int:
    from ..evals.dag import DagSyntaxError, check, read_trajectory

    path = Path(args.file).expanduser()
    try:
        result = check(read_trajectory(_read(path)))
    except DagSyntaxError as err:
        raise BadInput(f"dag check: {path}: {err}") from None
    if args.json:
        echo_json(result.to_json(), ensure_ascii=False)
    else:
        state = "closed" if result.closed else "valid, not closed" if result.valid else "not valid"
        echo(f"{path}: {state}; {result.nodes} steps, {result.edges} dependencies, {result.facts} from the problem")
        echo(f"closeness {result.closeness:.3f}  depth {result.depth}  width {result.width}  "
             f"branching {result.branching:.2f}  answer {one_line(result.answer or '(none)', 80)}")
        for v in result.violations:
            echo(f"  {one_line(str(v), 200)}")
    return EXIT_OK if result.valid else EXIT_FAILED
