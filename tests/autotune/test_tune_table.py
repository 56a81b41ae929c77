"""The tuner's table: one row per distinct configuration, and the best row of every strategy always shown."""

from __future__ import annotations

from typing import Any

import optuna
from rich.console import Console

from gnnplan.autotune.report import draws_line, peak_memory_text, ranked_table
from gnnplan.autotune.study import config_key, ranked_trials


def _trial(strategy: str, knobs: dict[str, Any], epoch_s: float, feasible: bool = True) -> optuna.trial.FrozenTrial:
    result = {"strategy": strategy, "knobs": knobs, "feasible": feasible, "epoch_time_s": epoch_s,
              "iteration_time_s": epoch_s / 3, "peak_memory_bytes": {"gpu": 1e9, "host": 1e9},
              "reason": "" if feasible else "out of GPU memory"}
    return optuna.trial.create_trial(value=epoch_s, params={}, distributions={},
                                     user_attrs={"result": result, "model": "sage"})


def _study(trials: list[optuna.trial.FrozenTrial]) -> optuna.Study:
    study = optuna.create_study(direction="minimize")
    study.add_trials(trials)
    return study


def test_near_copies_of_a_configuration_are_one_row_keeping_the_best() -> None:
    trials = [_trial("dp", {"cache_fraction": 0.993, "partitioner": "metis"}, 3.3),
              _trial("dp", {"cache_fraction": 0.997, "partitioner": "metis"}, 3.2),
              _trial("dp", {"cache_fraction": 0.954, "partitioner": "metis"}, 3.25),
              _trial("dp", {"cache_fraction": 0.997, "partitioner": "random"}, 3.4),
              _trial("dp", {"cache_fraction": 0.2, "partitioner": "metis"}, 5.0),
              _trial("hopgnn", {"cache_fraction": 0.997, "partitioner": "metis"}, 6.0)]
    rows = ranked_trials(_study(trials))
    assert [(r["strategy"], r["knobs"]["cache_fraction"], r["knobs"]["partitioner"], r["num_trials"])
            for r in rows] == [("dp", 0.997, "metis", 3), ("dp", 0.997, "random", 1), ("dp", 0.2, "metis", 1),
                               ("hopgnn", 0.997, "metis", 1)]
    assert [r["rank"] for r in rows] == [1, 2, 3, 4]
    assert config_key("dp", "sage", {"f": 0.993}) == config_key("dp", "sage", {"f": 0.954})
    assert config_key("dp", "sage", {"f": 0.2}) != config_key("dp", "sage", {"f": 0.3})


def test_infeasible_rows_follow_feasible_ones() -> None:
    rows = ranked_trials(_study([_trial("dp", {"cache_fraction": 0.9}, 1.0, feasible=False),
                                 _trial("dp", {"cache_fraction": 0.1}, 2.0)]))
    assert [r["feasible"] for r in rows] == [True, False]


def _render(table: Any) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_the_table_always_shows_the_best_row_of_each_strategy() -> None:
    trials = [_trial("dp", {"num_sampler_workers": i}, 1.0 + i / 100) for i in range(20)]
    trials += [_trial("gsplit", {"num_sampler_workers": 1}, 2.5), _trial("gsplit", {"num_sampler_workers": 2}, 2.0),
               _trial("hopgnn", {"num_sampler_workers": 1}, 3.0)]
    rows = ranked_trials(_study(trials))
    text = _render(ranked_table(rows, limit=5))
    lines = [line for line in text.splitlines() if line.startswith("│")]
    assert [line.split("│")[2].strip() for line in lines] == ["dp"] * 5 + ["gsplit", "hopgnn"]
    assert "best gsplit" in text and "best hopgnn" in text and "2.000 s" in text and "2.500 s" not in text
    assert ("23 distinct configurations (showing the best 5 and 2 more, the best of other strategies; --json has "
            "them all); the best of each strategy tried is always shown") in " ".join(text.split())
    # a strategy tried with two models (--allow-model-change): its best row of each says which model
    # (2026-12-01: ppgnn with SIGN was "best ppgnn" below ppgnn with SGC at rank 1)
    sgc, sign = _trial("ppgnn", {"hops": 2}, 0.5), _trial("ppgnn", {"hops": 2}, 2.2)
    sgc.user_attrs["model"], sign.user_attrs["model"] = "sgc", "sign"
    swapped = _render(ranked_table(ranked_trials(_study([*trials, sgc, sign])), limit=3))
    assert "best ppgnn with sign" in swapped and "best gsplit" in swapped and "best ppgnn;" not in swapped
    every = _render(ranked_table(rows[:3], limit=5))
    assert "3 distinct configurations; the best" in " ".join(every.split())  # all shown: nothing to say
    # a cluster without GPUs also shows each machine's host memory, where its graph and features are (2026-11-30:
    # only the workers' model memory, 13 MB against a run's 370 MB)
    cpu = _render(ranked_table(rows[:3], limit=5, on_cpu=True))
    assert "peak host memory (per machine)" in cpu and cpu.count("1.00 GB") == 6
    assert "peak host memory" not in every


def test_a_runs_peak_memory_reads_per_machine_and_per_gpu() -> None:
    assert peak_memory_text({"gpu": None, "host": 3.466e8}) == "peak memory 346.60 MB host per machine"
    assert peak_memory_text({"gpu": 2.5e9, "host": 4e10}) == "peak memory 40.00 GB host per machine, 2.50 GB per GPU"
    assert peak_memory_text({}) == "peak memory not measured"
    phases = {"training": {"gpu": None, "host": 3.0e8}, "evaluation": {"gpu": None, "host": 3.466e8}}
    assert (peak_memory_text({"gpu": None, "host": 3.466e8}, phases)
            == "peak memory 346.60 MB host per machine (training 300.00 MB, evaluation 346.60 MB)")


def test_the_draws_line_compares_strategies_only_when_several_were_tried() -> None:
    assert draws_line({"draws": [0, 1], "best_wins": 2, "num_best_rows": 3}) == \
        "proxy draws 0-1: the best configuration is the fastest of the strategies' best on 2 of 2 draws"
    assert draws_line({"draws": [0, 1], "best_wins": 2, "num_best_rows": 1}) == \
        "proxy draws 0-1: one strategy was tried; its best simulated on each draw"
