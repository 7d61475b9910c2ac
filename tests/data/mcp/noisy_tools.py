"""A plugin tool (TOOLPATH_PLUGINS=noisy_tools) that prints to stdout, which over stdio is the MCP wire."""

from toolpath.tools.registry import tool


@tool
def noisy(text: str) -> str:
    """Print to stdout, then answer.

    Args:
        text: anything
    """
    print("noise on stdout:", text)
    return "quiet " + text
