"""Workloads: specs, datasets (OGB raw layout, R-MAT generator), model FLOP/byte arithmetic, graph statistics."""
