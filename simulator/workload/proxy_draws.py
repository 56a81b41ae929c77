"""Which draws of a dataset card's proxy a command simulates a configuration on (``--proxy-draws R`` of
``simulate``, ``tune`` and ``whatif``): a card's statistics are one random draw of its synthetic proxy
(:mod:`.proxy`; a small card's the medoid of several, :mod:`.proxy_pool`), so the spread of a prediction over
draws ``card:<name>@K`` ... ``@K+R-1`` is how much of it is the draw's.
"""

from __future__ import annotations

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.limits import SEED_LIMIT
from gnnplan.simulator.workload.cards import CARD_PREFIX, DRAW_SEPARATOR, card_name
from gnnplan.simulator.workload.proxy import proxy_draw
from gnnplan.simulator.workload.proxy_pool import pooled_refs


def draw_refs(ref: object, draws: int) -> list[str] | None:
    """The ``workload.dataset`` references of ``draws`` proxy draws of a dataset card: its own draw K
    (``card:<name>@K``; no suffix: :data:`.proxy.PROXY_SEED`) and the next ``draws - 1`` (K + 1, ...); None when ``ref``
    is not a card (a real graph or a generator spec has no proxy to redraw).

    Raises:
        SpecError: a card reference with a malformed draw suffix, or draws past the seeds' range.
    """
    name = card_name(ref)
    if name is None:
        return None
    first = proxy_draw(str(ref))
    if first + draws > SEED_LIMIT:
        raise SpecError(f"--proxy-draws: draws {first} to {first + draws - 1} of {CARD_PREFIX}{name}: the last is "
                        "past the proxy seeds' range, 0 to 2**32 - 1")
    return [f"{CARD_PREFIX}{name}{DRAW_SEPARATOR}{first + i}" for i in range(draws)]


MAX_PROXY_DRAWS = 64
"""Most draws ``--proxy-draws`` takes: each builds a proxy graph and measures its statistics (seconds to minutes
for a 10^5-vertex proxy on the development machine), and the range reported (min to max) of 64 draws already
spans the middle ~97% of a statistic's draw-to-draw spread (the expected coverage of the range of n draws is
(n - 1) / (n + 1): David and Nagaraja, "Order Statistics", 3rd ed., 2003, §2.5); ``--proxy-draws 100000`` ran
without end (2026-12-01, a new user's pass)."""


def requested_draws(ref: object, draws: int, card_required: bool = True) -> list[str] | None:
    """``--proxy-draws`` of one dataset: :func:`draw_refs` when ``draws`` > 1, None for 1 (and, without
    ``card_required``, for a dataset that is not a card: a what-if point on a real graph).

    Raises:
        SpecError: ``draws`` < 1, or > 1 with ``card_required`` on a dataset that is not a card
            (:func:`no_draws_error`).
    """
    if draws < 1:
        raise SpecError(f"--proxy-draws: must be a positive integer (got {draws})")
    if draws > MAX_PROXY_DRAWS:
        raise SpecError(f"--proxy-draws: at most {MAX_PROXY_DRAWS} (got {draws}); every draw builds and measures a "
                        "proxy graph of its own")
    if draws == 1:
        return None
    refs = draw_refs(ref, draws)
    if refs is None and card_required:
        raise no_draws_error(ref)
    return refs


def redrawn(ref: object, refs: list[str]) -> list[str]:
    """The draws of ``refs`` (:func:`requested_draws` of ``ref``) still to simulate once ``ref`` itself is: all
    but the first, which is ``ref``'s own proxy, or all of them when ``ref``'s statistics are pooled over draws
    (:mod:`simulator.workload.proxy_pool`: its prediction is none of the draws')."""
    return list(refs) if pooled_refs(ref) is not None else list(refs[1:])


def no_draws_error(ref: object) -> SpecError:
    """The one-line error of ``--proxy-draws`` R > 1 on a dataset that is not a card (:func:`draw_refs`)."""
    from gnnplan.simulator.workload.spec import GeneratedSpec

    what = f"the generated graph {ref.name}" if isinstance(ref, GeneratedSpec) else repr(ref)
    return SpecError(f"--proxy-draws: needs a dataset card (workload.dataset: {CARD_PREFIX}<name>) to redraw; "
                     f"{what} is not one")
