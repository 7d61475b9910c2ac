"""Chemistry tools on molecules (`inputs.graphs`, named graph_1, graph_2, … in an episode, or SMILES written in a
call), computed with RDKit, which is imported only when a tool is called.

molecules.py turns a tool's `molecule` argument into an RDKit molecule and measures it, depict.py draws one (the
viewer's pictures, a match's highlight), tools.py registers `molecule_info` and `substructure`.
"""
