"""Checks of loaded dataset arrays that the file formats cannot express: finite, complete feature rows and usable
labels (issue 13: a NaN or ragged feature row trained to a NaN loss; an all-unlabeled label file trained nothing).

A ragged CSV row with fewer fields than the first one is filled with NaN by pandas, so it fails
:func:`check_features` too; a row with more fields fails pandas' parser (``Expected N fields``), reported by the
loader as a corrupt file.
"""

from __future__ import annotations

import numpy as np

from gnnplan.simulator.errors import SpecError

CHECK_ROWS = 65_536
"""Feature rows checked at a time (bounds the temporary boolean array to 64 Ki x feature_dim bytes)."""
MAX_NUM_CLASSES = 1_000_000
"""Largest class id + 1 accepted: the OGB node-property tasks have at most 349 classes (ogbn-mag venues;
Hu et al., "Open Graph Benchmark", NeurIPS 2020, Table 2); a larger id is a corrupt file, and the model's output
layer would grow with it."""


def check_features(features: np.ndarray, dataset: str, what: str) -> None:
    """Every feature row is complete and finite.

    Shapes:
        features: (num_vertices, feature_dim) float.

    Args:
        features: the feature matrix as loaded.
        dataset: the dataset's name (for the message).
        what: the file it came from, e.g. ``raw/node-feat.csv.gz``.

    Raises:
        SpecError: the matrix is not 2-D, or a row holds NaN or an infinity (the first such row is named, with
            its line in a CSV file: row r is line r + 1).
    """
    if features.ndim != 2:
        raise SpecError(f"dataset {dataset}: {what} must be a (num_vertices, feature_dim) matrix, "
                        f"got shape {features.shape}")
    for start in range(0, features.shape[0], CHECK_ROWS):
        finite = np.isfinite(features[start:start + CHECK_ROWS]).all(axis=1)
        if not finite.all():
            row = start + int(np.argmin(finite))
            raise SpecError(f"dataset {dataset}: {what} row {row} (line {row + 1}) holds a missing or non-finite "
                            f"value (NaN, inf, or a row shorter than the first); every row needs "
                            f"{features.shape[1]} finite numbers")


def check_labels(labels: np.ndarray, train_idx: np.ndarray, dataset: str, what: str) -> None:
    """Labels are class ids ``0 <= y < MAX_NUM_CLASSES`` or -1 (unlabeled), and the training split has at least
    one labeled vertex.

    Shapes:
        labels: (num_vertices,) int64; train_idx: (k,) int64 vertex ids (already checked to be in range).

    Raises:
        SpecError: a label below -1 or too large, every vertex unlabeled, or a training split without labels.
    """
    if labels.size and (labels.min() < -1 or labels.max() >= MAX_NUM_CLASSES):
        bad = int(labels[(labels < -1) | (labels >= MAX_NUM_CLASSES)][0])
        raise SpecError(f"dataset {dataset}: {what} holds label {bad}; labels are class ids 0 to "
                        f"{MAX_NUM_CLASSES - 1}, or -1 for an unlabeled vertex")
    if not (labels >= 0).any():
        raise SpecError(f"dataset {dataset}: {what} has no labeled vertex (all -1 or empty); node classification "
                        "needs labels")
    if train_idx.size == 0 or not (labels[train_idx] >= 0).any():
        raise SpecError(f"dataset {dataset}: the training split has no labeled vertex ({train_idx.size} vertices, "
                        f"all -1 in {what})")
