"""The tuner: constrained Optuna study over strategies and knobs, shared SQLite storage, plan output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from gnnplan.autotune.cli import main
from gnnplan.autotune.study import TuneRequest, ranked_trials, run_study
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import load_plan
from gnnplan.simulator.workload.spec import load_workload


def test_two_tune_processes_share_one_sqlite_study(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    env = {**os.environ, "DGLBACKEND": "pytorch"}
    # Measure graph statistics once so both processes race only on the study, not on the cache.
    assert main(["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp",
                 "--json"]) == 0
    cmd = [sys.executable, "-m", "gnnplan.autotune.cli", "tune", "--cluster", "4x-a100-10gbe",
           "--workload", "cora-sage",
           "--strategies", "dp", "--trials", "6", "--storage", storage, "--study", "shared", "--json"]
    procs = [subprocess.Popen([*cmd, "--seed", str(i), "-o", str(tmp_path / f"plan{i}.yaml")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    study = optuna.load_study(study_name="shared", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 12
    assert len({t.number for t in complete}) == 12
    for i in range(2):
        assert load_plan(tmp_path / f"plan{i}.yaml").strategy == "dp"


def test_out_of_memory_configurations_are_constrained_out(tmp_path: Path) -> None:
    base = yaml.safe_load(Path(load_cluster.__code__.co_filename).with_name("presets").joinpath(
        "4x-a100-10gbe.yaml").read_text())
    # A GPU so small that large feature caches cannot fit: the model charges an 800 MB CUDA context plus ~4 MB
    # for a Cora batch, and Cora's features are 2708 x 1433 x 4 B = 15.5 MB, so caches above ~35% overflow.
    base["gpu"]["memory_bytes"] = 8.1e8
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(base))
    req = TuneRequest(load_cluster(path), load_workload("cora-sage"), ("dp",), num_trials=25,
                      storage=f"sqlite:///{tmp_path / 's.db'}", study_name="oom")
    study = run_study(req)
    rows = ranked_trials(study)
    infeasible = [r for r in rows if not r["feasible"]]
    assert infeasible, "the search space must reach configurations that do not fit"
    for t in study.trials:
        over = t.constraints["memory_excess_bytes"] > 0
        assert over == (not t.user_attrs["result"]["feasible"])
    best = study.best_trial.user_attrs["result"]
    assert best["feasible"] and best["peak_memory_bytes"]["gpu"] <= 8.1e8
    assert rows[0]["feasible"] and all(r["feasible"] for r in rows[: len(rows) - len(infeasible)])


def test_tune_writes_plan_and_resumes(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    storage = f"sqlite:///{tmp_path / 's.db'}"
    plan = tmp_path / "plan.yaml"
    argv = ["tune", "--cluster", "dgx-a100", "--workload", "cora-sage", "--strategies", "dp", "--trials", "4",
            "--storage", storage,
            "-o", str(plan), "--json"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert '"num_trials_total": 4' in first and '"num_trials_total": 8' in second
    # the resumed run proposes new configurations: the same --seed again had repeated the first run's random
    # start-up trials, each simulated again (2026-12-01)
    study = optuna.load_study(study_name=json.loads(second)["study"], storage=storage)
    assert len({tuple(sorted(t.params.items())) for t in study.trials}) == 8
    p = load_plan(plan)
    assert p.num_workers == 8 and p.strategy == "dp"
    assert p.prediction["feasible"] and p.prediction["epoch_time_s"] > 0


def test_a_configuration_proposed_again_is_not_simulated_again(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """neutronstar on a full-graph workload has one categorical knob (3 modes): 12 trials repeat configurations,
    which the study's memo answers with the very result of the first simulation (marked ``reused``)."""
    from gnnplan.simulator.strategies import get_strategy

    module = get_strategy("neutronstar")
    calls: list[Any] = []
    real = module.simulate

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "simulate", counting)
    req = TuneRequest(load_cluster("4x-a100-10gbe"), load_workload("cora-gcn-full"), ("neutronstar",),
                      num_trials=12, storage=f"sqlite:///{tmp_path / 's.db'}", study_name="memo")
    study = run_study(req)
    assert len(study.trials) == 12
    distinct = {tuple(sorted(t.params.items())) for t in study.trials}
    assert len(calls) == len(distinct) < 12
    assert sum(not t.user_attrs["reused"] for t in study.trials) == len(distinct)
    by_params: dict[tuple[Any, ...], dict[str, Any]] = {}
    for t in study.trials:
        seen = by_params.setdefault(tuple(sorted(t.params.items())), t.user_attrs["result"])
        assert seen == t.user_attrs["result"]


def test_tune_over_proxy_draws_redraws_each_strategy_s_best(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``tune --proxy-draws 2`` on a card: exactly the best feasible row of each strategy is simulated again on
    the next draw (what ``simulate`` gives there, same knobs), and ``best_wins`` counts the draws where rank 1
    stays the fastest of them; on a real graph the option is a one-line error and no plan is written."""
    import json

    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.workload.spec import workload_from_dict

    spec = {"dataset": "card:cora", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 64},
            "training": {"mode": "mini-batch", "batch_size": 64, "fanouts": [10, 10]}}
    wl = tmp_path / "wl.yaml"
    wl.write_text(yaml.safe_dump(spec))
    argv = ["tune", "--cluster", "4x-v100-32gb-100gbib", "--workload", str(wl), "--strategies", "dp,gsplit",
            "--trials", "12", "--storage", f"sqlite:///{tmp_path / 's.db'}", "--proxy-draws", "2",
            "-o", str(tmp_path / "plan.yaml")]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    firsts = {}
    for row in out["ranked"]:
        if row["feasible"]:
            firsts.setdefault(row["strategy"], row)
    drawn = [r for r in out["ranked"] if "epoch_time_draws_s" in r]
    assert sorted(r["rank"] for r in drawn) == sorted(r["rank"] for r in firsts.values()) and len(drawn) == 2
    other = workload_from_dict({**spec, "dataset": "card:cora@1"})
    for row in drawn:
        assert row["proxy_draws"] == [0, 1] and row["epoch_time_draws_s"][0] == row["epoch_time_s"]
        assert row["epoch_time_draws_s"][1] == simulate("4x-v100-32gb-100gbib", other, row["strategy"],
                                                        row["knobs"]).epoch_time_s
    best = min(drawn, key=lambda r: r["rank"])
    wins = sum(all(best["epoch_time_draws_s"][d] <= r["epoch_time_draws_s"][d] for r in drawn) for d in range(2))
    assert out["proxy_draws"] == {"draws": [0, 1], "best_wins": wins, "num_best_rows": 2}
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "the best configuration is the fastest of the strategies' best on" in text
    assert "statistics: estimated on draw 0 of card cora's proxy (2,708 vertices;" in text  # the suite pools 1
    bad = ["tune", "--cluster", "4x-v100-32gb-100gbib", "--workload", "cora-sage", "--trials", "2", "--storage",
           f"sqlite:///{tmp_path / 'b.db'}", "--proxy-draws", "2", "-o", str(tmp_path / "bad.yaml")]
    assert main(bad) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--proxy-draws: needs a dataset card" in err[0]
    assert not (tmp_path / "bad.yaml").exists()
    # a generated graph by its name, not its spec's repr (2026-11-30: "RmatSpec(generator='rmat', ...)")
    assert main([*bad[:4], "rmat100k-sage", *bad[5:]]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("to redraw; the generated graph rmat-n100000-e16-f128-c16-t0.1-v0.05-s0.1-seed0 is not one")
    assert main([*bad[:-3], "100000", *bad[-2:]]) == 2  # a draw count that would run without end (2026-12-01)
    assert capsys.readouterr().err.strip().endswith("--proxy-draws: at most 64 (got 100000); every draw builds and "
                                                    "measures a proxy graph of its own")


def test_the_note_names_the_strategies_no_trial_sampled(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    storage = f"sqlite:///{tmp_path / 's.db'}"
    argv = ["tune", "--cluster", "dgx-a100", "--workload", "cora-sage", "--trials", "1", "--storage", storage,
            "-o", str(tmp_path / "plan.yaml"), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    tried = {r["strategy"] for r in out["ranked"]}
    assert len(tried) == 1  # one trial: one strategy sampled
    missing = [s for s in ("dp", "gsplit", "hopgnn") if s not in tried]
    assert out["note"].startswith(f"compared {tried.pop()} for mini-batch training of sage")
    assert f"no trial of this study sampled {', '.join(missing)}: raise --trials to compare them" in out["note"]
    assert "(not compared: neutronstar, ppgnn, hongtu, of other training semantics;" in out["note"]
    # asked for dp alone: nothing the user asked for went uncompared, so no such list
    assert main([*argv[:-3], "--strategies", "dp", "-o", str(tmp_path / "dp.yaml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["note"] == "compared dp for mini-batch training of sage"


def test_a_named_study_of_another_search_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    storage = f"sqlite:///{tmp_path / 's.db'}"
    base = ["tune", "--workload", "cora-sage", "--strategies", "dp", "--trials", "1", "--storage", storage,
            "--study", "mine", "--json"]
    assert main([*base, "--cluster", "4x-a100-10gbe", "-o", str(tmp_path / "a.yaml")]) == 0
    assert main([*base, "--cluster", "4x-a100-10gbe", "-o", str(tmp_path / "a.yaml")]) == 0  # the same search
    capsys.readouterr()
    assert main([*base, "--cluster", "dgx-a100", "-o", str(tmp_path / "b.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--study: 'mine' holds trials of another search" in err[0], err
    assert not (tmp_path / "b.yaml").exists()
    study = optuna.load_study(study_name="mine", storage=storage)
    assert len(study.trials) == 2  # nothing was added by the refused run
    # the strategies are a set: listed in another order, the same search (2026-12-01: refused, and without
    # --study a second study)
    both = ["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--trials", "1", "--storage", storage,
            "-o", str(tmp_path / "c.yaml"), "--json", "--strategies"]
    assert main([*both, "hopgnn,dp"]) == 0
    first = json.loads(capsys.readouterr().out)["study"]
    assert main([*both, "dp,hopgnn"]) == 0
    assert json.loads(capsys.readouterr().out)["study"] == first
    assert len(optuna.load_study(study_name=first, storage=storage).trials) == 2
