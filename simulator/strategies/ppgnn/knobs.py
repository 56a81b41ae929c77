"""The ``ppgnn`` strategy's knobs (mechanism and terms: :mod:`simulator.strategies.ppgnn`), in a module of their
own so that the plug-in and its work model both import them."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from gnnplan.simulator.spec_model import SpecModel


class Knobs(SpecModel):
    """The ``ppgnn`` strategy's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hops: int = Field(default=2, ge=0, le=16, description="R: propagation hops (SGC reads hop R, SIGN hops 0..R)")
    placement: Literal["gpu", "host", "ssd"] | None = Field(
        default=None, description="where the hop matrices live; none = the paper's rule (GPU, else host, else SSD)")
    loader: Literal["baseline", "fused", "double_buffer"] = Field(
        default="double_buffer", description="per-row DataLoader, one index op per matrix, or fused + prefetch")
    reshuffle: Literal["random", "chunk"] = Field(
        default="random", description="per-row permutation (SGD-RR) or permutation of contiguous chunks (SGD-CR)")
    chunk_size: int | None = Field(
        default=None, ge=1, description="rows per chunk under chunk reshuffling; none = the global batch size")
    batch_size: int | None = Field(
        default=None, ge=1, description="overrides training.batch_size (global rows per iteration) if set")
