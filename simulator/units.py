"""Widths of the numbers gnnplan moves: the one definition every module uses (DESIGN.md, "Units and names")."""

FLOAT_BYTES = 4
"""float32 features, activations, parameters and gradients. Source: IEEE 754-2008 binary32."""
INDEX_BYTES = 8
"""int64 vertex / edge ids, DGL's default idtype (dgl.DGLGraph idtype docs)."""
