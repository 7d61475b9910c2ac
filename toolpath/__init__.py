"""toolpath: a graph-based runtime for tool-using multimodal agents."""

__version__ = "0.1.0"
