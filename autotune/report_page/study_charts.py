"""The report's charts of a tuning study: the tuner's ranking (best configuration of each strategy), the phase
breakdown of those configurations, the optimisation history and per-strategy knob importances.

Trials are read as ``gnnplan tune`` records them (:mod:`autotune.study`): the parameter ``strategy`` is the
candidate's label, the user attribute ``result`` the simulation (``simulate --json`` contract), the constraint
``memory_excess_bytes`` > 0 marks an infeasible configuration.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

from gnnplan.autotune.report import knobs_text
from gnnplan.autotune.report_page.style import layout, ordered_phases, strategy_colors
from gnnplan.autotune.study import ranked_trials
from gnnplan.simulator.wording import counted

MIN_IMPORTANCE_TRIALS = 5
"""Feasible trials a strategy needs before its knob importances are estimated (fewer give noise)."""
MS = 1e3


def _label(row: dict[str, Any], models: set[str]) -> str:
    return f"{row['strategy']} ({row['model']})" if len(models) > 1 else row["strategy"]


def best_per_strategy(study: Any) -> list[dict[str, Any]]:
    """The best configuration of each strategy (and model), best first: rows of
    :func:`autotune.study.ranked_trials` with ``label`` and the trial's ``breakdown_s`` added; a strategy
    with no feasible trial appears with its best infeasible one."""
    rows = ranked_trials(study)
    models = {r["model"] for r in rows}
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    best: dict[str, dict[str, Any]] = {}
    for r in rows:
        label = _label(r, models)
        if label not in best:
            result = trials[r["trial"]].user_attrs["result"]
            best[label] = {**r, "label": label, "breakdown_s": dict(result.get("breakdown_s", {})),
                           "nested_phases": dict(result.get("nested_phases") or {})}
    return list(best.values())


def ranking_figure(best: list[dict[str, Any]]) -> Any:
    """Horizontal bars: the best simulated epoch time of each strategy (feasible ones), knobs on hover;
    infeasible strategies are named in the title."""
    import plotly.graph_objects as go

    ok = [b for b in best if b["feasible"]]
    bad = [b["label"] for b in best if not b["feasible"]]
    colors = strategy_colors(b["label"] for b in best)
    fig = go.Figure(go.Bar(
        orientation="h", y=[b["label"] for b in ok], x=[b["epoch_time_s"] * MS for b in ok],
        marker={"color": [colors[b["label"]] for b in ok]}, text=[f"#{b['rank']}" for b in ok],
        textposition="outside", customdata=[[knobs_text(b["knobs"]), b["num_trials"]] for b in ok],
        hovertemplate="%{y}: %{x:.4g} ms<br>%{customdata[0]}<br>%{customdata[1]} trial(s)<extra></extra>"))
    title = "tuner's ranking: best simulated epoch time of each strategy (#: rank among all configurations)"
    if bad:
        title += f"<br><sub>no feasible configuration: {', '.join(bad)}</sub>"
    fig.update_layout(**layout(title, 160 + 40 * max(len(ok), 1), showlegend=False))
    fig.update_yaxes(categoryorder="array", categoryarray=[b["label"] for b in ok][::-1])
    fig.update_xaxes(title="simulated epoch time (ms)", rangemode="tozero")
    return fig


def breakdown_figure(best: list[dict[str, Any]], colors: dict[str, str]) -> Any:
    """Stacked bars per strategy (its best configuration): each phase's time of the slowest worker over
    one epoch (SimResult.breakdown_s, its one-off phases left out: ppgnn's preprocess is not in an epoch, and its
    nested ones: dp's fetch is part of its load's time), with the epoch time as a diamond. Phases overlap in time,
    so the stack may exceed the epoch time."""
    import plotly.graph_objects as go

    from gnnplan.simulator.result import ONE_OFF_PHASES

    ok = [b for b in best if b["feasible"]]
    labels = [b["label"] for b in ok]
    inside = {p for b in ok for p in (b.get("nested_phases") or {})}
    fig = go.Figure()
    for phase in ordered_phases(p for b in ok for p in b["breakdown_s"] if p not in ONE_OFF_PHASES
                                and p not in inside):
        fig.add_bar(x=labels, y=[b["breakdown_s"].get(phase, 0.0) * MS for b in ok], name=phase,
                    marker={"color": colors.get(phase)}, hovertemplate=f"{phase}: %{{y:.4g}} ms<extra></extra>")
    fig.add_scatter(x=labels, y=[b["epoch_time_s"] * MS for b in ok], mode="markers", name="epoch time",
                    marker={"symbol": "diamond", "size": 13, "color": "black"},
                    hovertemplate="epoch time %{y:.4g} ms<extra></extra>")
    fig.update_layout(**layout("phase breakdown of each strategy's best configuration (simulated, one epoch)", 480,
                               barmode="stack"))
    fig.update_yaxes(title="time of the slowest worker (ms)")
    return fig


def history_figure(study: Any) -> Any:
    """Each completed trial's simulated epoch time by trial number, coloured by strategy, and the best so far
    (feasible trials only; the number of infeasible ones is in the title)."""
    import optuna
    import plotly.graph_objects as go

    done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if t.user_attrs.get("result")]
    feasible = [t for t in done if t.user_attrs["result"]["feasible"]]
    by_label: dict[str, list[Any]] = {}
    for t in feasible:
        by_label.setdefault(str(t.params.get("strategy", t.user_attrs["result"]["strategy"])), []).append(t)
    colors = strategy_colors(by_label)
    fig = go.Figure()
    for label, trials in sorted(by_label.items()):
        fig.add_scatter(x=[t.number for t in trials], y=[t.user_attrs["result"]["epoch_time_s"] * MS for t in trials],
                        mode="markers", name=label, marker={"color": colors[label], "size": 8},
                        customdata=[knobs_text(t.user_attrs["result"]["knobs"]) for t in trials],
                        hovertemplate="trial %{x}: %{y:.4g} ms<br>%{customdata}<extra>" + label + "</extra>")
    best, xs, ys = float("inf"), [], []
    for t in sorted(feasible, key=lambda t: t.number):
        best = min(best, t.user_attrs["result"]["epoch_time_s"])
        xs.append(t.number)
        ys.append(best * MS)
    fig.add_scatter(x=xs, y=ys, mode="lines", line={"shape": "hv", "color": "black"}, name="best so far")
    title = (f"optimisation history: {len(done)} trials of study {study.study_name}"
             f"<br><sub>{len(done) - len(feasible)} infeasible (out of memory) not drawn</sub>")
    fig.update_layout(**layout(title, 460, margin={"l": 160, "r": 30, "t": 90, "b": 50}))
    fig.update_xaxes(title="trial")
    fig.update_yaxes(title="simulated epoch time (ms)", type="log")
    return fig


def importance_evaluator() -> tuple[Any, str]:
    """Optuna's fANOVA evaluator when scikit-learn is installed (its random forest needs it), else Optuna's
    PED-ANOVA, which needs nothing beyond NumPy/SciPy.

    Source: Hutter, Hoos and Leyton-Brown, "An Efficient Approach for Assessing Hyperparameter Importance",
    ICML 2014 (fANOVA); Watanabe, Bansal and Hutter, "PED-ANOVA: Efficiently Quantifying Hyperparameter
    Importance in Arbitrary Subspaces", IJCAI 2023.

    Returns:
        (evaluator, a sentence naming it and why it was chosen).
    """
    from optuna.importance import FanovaImportanceEvaluator, PedAnovaImportanceEvaluator

    if importlib.util.find_spec("sklearn") is not None:
        return FanovaImportanceEvaluator(seed=0), "fANOVA (Optuna's default; scikit-learn is installed)"
    return PedAnovaImportanceEvaluator(), ("PED-ANOVA (Optuna's; scikit-learn, which fANOVA needs, is not "
                                           "installed)")


def importances(study: Any) -> tuple[dict[str, dict[str, float]], dict[str, str], str]:
    """Knob importances per strategy, each over that strategy's feasible trials (the search space is
    conditional on the strategy, so one evaluation over all trials would see only the shared parameter).

    Returns:
        ({label: {parameter: importance (sums to 1)}}, {label: why it has none}, evaluator description).
    """
    import optuna
    from optuna.importance import get_param_importances

    evaluator, about = importance_evaluator()
    groups: dict[str, list[Any]] = {}
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        res = t.user_attrs.get("result")
        if res and res["feasible"] and "strategy" in t.params:
            groups.setdefault(str(t.params["strategy"]), []).append(t)
    out: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for label, trials in sorted(groups.items()):
        knobs = sorted({p for t in trials for p in t.params if p != "strategy"})
        varied = [p for p in knobs if len({repr(t.params.get(p)) for t in trials}) > 1]
        if len(trials) < MIN_IMPORTANCE_TRIALS or not varied:
            skipped[label] = (f"{counted(len(trials), 'feasible trial')}" if varied else "no knob varied") + \
                f"; importances need {MIN_IMPORTANCE_TRIALS} with varied knobs"
            continue
        sub = optuna.create_study(direction=study.direction)
        sub.add_trials(trials)
        with warnings.catch_warnings():  # PED-ANOVA warns, and returns equal importances, when it cannot tell
            warnings.filterwarnings("ignore", message="Target and region quantiles select the same set of trials")
            found = dict(get_param_importances(sub, evaluator=evaluator, params=varied))
        if len(found) > 1 and len(set(found.values())) == 1:
            skipped[label] = (f"{len(trials)} feasible trials, but {about.split(' ')[0]} cannot tell the knobs "
                              "apart (equal importances)")
            continue
        out[label] = found
    return out, skipped, about


def importance_figure(study: Any) -> tuple[Any | None, str]:
    """Horizontal bars of :func:`importances`, one colour per strategy.

    Returns:
        (figure or None when no strategy had enough trials, caption naming the evaluator and the skipped ones).
    """
    import plotly.graph_objects as go

    imp, skipped, about = importances(study)
    caption = f"evaluator: {about}" + "".join(f"; {k}: {v}" for k, v in skipped.items())
    if not imp:
        return None, caption
    import optuna

    done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if (t.user_attrs.get("result") or {}).get("feasible")]
    counts = {label: sum(1 for t in done if str(t.params.get("strategy")) == label) for label in imp}
    caption += ("; over " + ", ".join(f"{label}: {counted(n, 'feasible trial')}" for label, n in counts.items())
                + ": knobs that changed together in those trials share their importance however it falls, so few "
                  "trials say little (tune with more --trials)")
    colors = strategy_colors(imp)
    fig = go.Figure()
    for label, values in imp.items():
        names = sorted(values, key=lambda n: values[n])
        fig.add_bar(orientation="h", y=names, x=[values[n] for n in names], name=label,
                    marker={"color": colors[label]}, hovertemplate="%{y}: %{x:.3f}<extra>" + label + "</extra>")
    rows = sum(len(v) for v in imp.values())
    fig.update_layout(**layout("knob importance for the simulated epoch time, per strategy", 140 + 26 * rows))
    fig.update_xaxes(title="importance (per strategy, sums to 1)", range=[0, 1])
    return fig, caption
