from pathlib import Path

import helpers  # noqa: F401  registers tick and slow
import pytest

from toolpath.tools.registry import ToolContext, ToolError, get_tool, parse_docstring, tool


@tool(cost=2.5, quality=0.8)
def sample(name: str, count: int = 2, scale: float | None = None, tags: list[str] = [],  # noqa: B006 - a tool as written
           ctx: ToolContext = None) -> str:
    """Do a sample thing.

    It spans two lines.

    Args:
        name: who to greet
        count: how many times,
            wrapped onto a second line
        scale: optional factor

    Returns:
        text
    """
    return " ".join([name] * count) + (f" {ctx.run_id}" if ctx else "")


def test_schema_comes_from_hints_and_docstring():
    s = sample.tool.schema()
    assert s["name"] == "sample"
    assert s["description"] == "Do a sample thing. It spans two lines."
    props = s["parameters"]["properties"]
    assert props["name"] == {"type": "string", "description": "who to greet"}
    assert props["count"]["type"] == "integer" and props["count"]["default"] == 2
    assert props["count"]["description"] == "how many times, wrapped onto a second line"
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert "ctx" not in props  # the context is injected, never asked of the model
    assert s["parameters"]["required"] == ["name"]
    assert sample.tool.cost == 2.5 and sample.tool.quality == 0.8


def test_arguments_are_validated_before_the_call():
    t = sample.tool
    with pytest.raises(ToolError, match="name: Field required"):
        t.call({})
    with pytest.raises(ToolError, match="count: Input should be a valid integer.*'many'"):
        t.call({"name": "a", "count": "many"})
    with pytest.raises(ToolError, match="colour: unknown argument"):
        t.call({"name": "a", "colour": "red"})
    with pytest.raises(ToolError, match="must be a JSON object"):
        t.call(["a"])
    assert t.call({"name": "a", "count": "3"}, ToolContext(run_id="r1")).content == "a a a r1"


def test_timeout_and_crash_become_tool_errors():
    with pytest.raises(ToolError, match="timed out after 0.3 s"):
        get_tool("slow").call({"seconds": 2})

    @tool
    def broken(x: int) -> str:
        """Always fails."""
        return str(1 // (x - x))

    with pytest.raises(ToolError, match="broken: ZeroDivisionError"):
        broken.tool.call({"x": 1})


def test_quality_prior_must_be_in_range():
    with pytest.raises(ValueError, match="quality"):
        tool(quality=1.5)(lambda: "x")


def test_docstring_without_args_section():
    assert parse_docstring("Just a summary.") == ("Just a summary.", {})


def test_unknown_tool_names_what_exists():
    with pytest.raises(ToolError, match="unknown tool 'nope'.*calculator"):
        get_tool("nope")


@pytest.mark.parametrize("expr, want", [
    ("2+3", "5"), ("(17 + 4) * 3 / 2", "31.5"), ("2^10", "1024"), ("sqrt(16)", "4"), ("-3 ** 2", "-9"),
    ("10 // 3", "3"), ("7 % 4", "3"), ("1/3", "0.3333333333333333"), ("pi", "3.141592653589793"),
])
def test_calculator(expr, want):
    assert get_tool("calculator").call({"expression": expr}).content == want


@pytest.mark.parametrize("expr, words", [
    ("__import__('os').system('true')", "not arithmetic"), ("1/0", "division by zero"), ("9**9**9", "too large"),
    ("2 +", "cannot parse"), ("", "empty"), ("x + 1", "not arithmetic"), ("open('f')", "not arithmetic"),
])
def test_calculator_refuses_what_is_not_arithmetic(expr, words):
    with pytest.raises(ToolError, match=words):
        get_tool("calculator").call({"expression": expr})


def test_read_file_only_reads_task_inputs(tmp_path, store):
    allowed = tmp_path / "notes.txt"
    allowed.write_text("hello")
    secret = tmp_path / "secret.txt"
    secret.write_text("no")
    png = tmp_path / "pic.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    ctx = ToolContext(inputs=[allowed, png], save_artifact=store.put_artifact)
    rf = get_tool("read_file")
    assert rf.call({"path": "notes.txt"}, ctx).content == "hello"
    assert rf.call({"path": str(allowed)}, ctx).content == "hello"
    for bad in ("secret.txt", str(secret), "../secret.txt", "/etc/passwd"):
        with pytest.raises(ToolError, match="not one of this task's input files"):
            rf.call({"path": bad}, ctx)
    img = rf.call({"path": "pic.png"}, ctx)
    assert img.artifacts and img.artifacts[0].mime == "image/png"
    assert Path(img.artifacts[0].path).read_bytes() == png.read_bytes()


def test_final_answer_accepts_numbers():
    r = get_tool("final_answer").call({"answer": 5})
    assert r.final and r.content == "5"


def test_a_tool_plugin_that_fails_to_import_is_an_error_naming_it(monkeypatch):
    from toolpath import registry
    from toolpath.tools.registry import load_tools

    monkeypatch.setenv("TOOLPATH_PLUGINS", "no_such_toolpath_plugin")
    registry.reset()
    try:
        with pytest.raises(ToolError, match="no_such_toolpath_plugin.*TOOLPATH_PLUGINS"):
            load_tools()
        with pytest.raises(ToolError, match="no_such_toolpath_plugin"):  # not marked loaded by the failure
            load_tools()
    finally:
        monkeypatch.delenv("TOOLPATH_PLUGINS")
        registry.reset()
    assert "calculator" in load_tools()
