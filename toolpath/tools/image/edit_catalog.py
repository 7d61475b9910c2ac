"""Imports the modules whose edit tools register themselves (see edit_base.register_edit_tool)."""

from . import fill, locate, learned, paint, text  # noqa: F401
