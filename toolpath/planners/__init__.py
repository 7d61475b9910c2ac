"""Planners: the subtask chain of an instruction, A* over toolpaths, and the learned subroutine library."""
