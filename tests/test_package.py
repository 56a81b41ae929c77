"""The installed package: `import gnnplan` is the API, the folders install only below `gnnplan`, `--version`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gnnplan
from gnnplan.simulator.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_api_simulates_a_preset() -> None:
    res = gnnplan.simulate("4x-a100-10gbe", "cora-gcn-full", "neutronstar", {"mode": "depcomm"})
    direct = gnnplan.simulate(gnnplan.load_cluster("4x-a100-10gbe"), gnnplan.load_workload("cora-gcn-full"),
                              "neutronstar", {"mode": "depcomm"})
    assert res.feasible and res.epoch_time_s > 0 and res.epoch_time_s == direct.epoch_time_s
    assert "dp" in gnnplan.strategy_names() and "4x-a100-10gbe" in gnnplan.preset_names()


def test_api_simulates_proxy_draws() -> None:
    """``simulate_on_draws`` is ``simulate`` with the workload's dataset set to each card reference in turn."""
    wl = gnnplan.load_workload("cora-sage").model_copy(update={"dataset": "card:cora"})
    refs = ["card:cora@0", "card:cora@2"]
    drawn = gnnplan.simulate_on_draws("4x-a100-10gbe", wl, "dp", {"partitioner": "random"}, refs)
    alone = [gnnplan.simulate("4x-a100-10gbe", wl.model_copy(update={"dataset": r}), "dp", {"partitioner": "random"})
             for r in refs]
    assert [r.epoch_time_s for r in drawn] == [r.epoch_time_s for r in alone]
    assert drawn[0].epoch_time_s != drawn[1].epoch_time_s  # two proxy graphs
    assert drawn[1].estimated["proxy"]["draw"] == 2


@pytest.mark.parametrize("cwd", [ROOT, Path("/")], ids=["repo-root", "elsewhere"])
@pytest.mark.parametrize("name", ["simulator", "executor", "autotune"])
def test_folders_do_not_import_as_top_level_packages(name: str, cwd: Path) -> None:
    proc = _python(f"import {name}", cwd)
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr or "ModuleNotFoundError" in proc.stderr


def test_import_gnnplan_loads_no_heavy_module() -> None:
    proc = _python("import sys, gnnplan\nprint(sorted(m for m in ('torch', 'dgl', 'optuna', 'gnnplan.executor') "
                   "if m in sys.modules))", Path("/"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_api_names_load_on_first_use_and_a_worker_s_import_skips_them() -> None:
    """``import gnnplan`` defers the API's names (PEP 562): a worker process importing the executor's
    communication module loads neither the simulator's strategies nor SciPy's optimisers, and every name of
    ``__all__`` still resolves (an unknown one is an AttributeError)."""
    proc = _python("import sys\nfrom gnnplan.executor import comm\nprint(sorted(m for m in ("
                   "'gnnplan.simulator.strategies', 'gnnplan.simulator.api', 'scipy.optimize') if m in sys.modules))",
                   Path("/"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert set(gnnplan.__all__) <= set(dir(gnnplan))  # listed before first use (tab completion)
    for name in gnnplan.__all__:
        assert getattr(gnnplan, name) is not None, name
    assert gnnplan.load_cluster("local").name and gnnplan.strategy_names()[0] == "dp"
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        gnnplan.simulat  # noqa: B018


def test_version_from_the_console_script_and_python_m() -> None:
    for cmd in (["gnnplan", "--version"], [sys.executable, "-m", "gnnplan", "--version"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip() == f"gnnplan {gnnplan.__version__}"


def test_api_whatif_sweeps_a_field(tmp_path: Path) -> None:
    out = gnnplan.whatif("4x-a100-10gbe", "cora-gcn-full", ["network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s"],
                         trials=3, output=tmp_path)
    assert len(out["summary"]) == 2 and (tmp_path / "whatif.html").is_file()
    assert {r["strategy"] for r in out["rows"]} >= {"neutronstar"}
    # the CLI's --allow-model-change: ppgnn (SGC, SIGN) competes on GraphSAGE's workload; and --cluster-set,
    # applied at every point: with 1 MB of GPU memory nothing fits
    for sets, fits in (([], True), (["gpu.memory_bytes=1MB"], False)):
        out = gnnplan.whatif("4x-a100-10gbe", "cora-sage", ["network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s"],
                             trials=2, cluster_set=sets, allow_model_change=True, strategies=["ppgnn"])
        assert {r["strategy"] for r in out["rows"]} == {"ppgnn/sgc", "ppgnn/sign"}
        assert {r["feasible"] for r in out["rows"]} == {fits}
    with pytest.raises(SpecError, match="^cluster_set: "):
        gnnplan.whatif("4x-a100-10gbe", "cora-sage", ["num_machines=1,2"], trials=1, cluster_set=["bogus"])


def test_a_module_importing_dgl_needs_no_backend_in_the_environment() -> None:
    """DGL prints "DGL backend not selected" when it is imported without ``DGLBACKEND``; importing through the
    ``gnnplan`` package sets it first, so no command prints it."""
    env = {k: v for k, v in os.environ.items() if k != "DGLBACKEND"}
    code = "import gnnplan.executor.sampling, os; print(os.environ['DGLBACKEND'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "pytorch" and "backend not selected" not in out.stderr + out.stdout


@pytest.mark.parametrize("call, needle", [
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", trials=0, output=tmp / "p.yaml"),
     "trials: must be a positive integer (got 0)"),
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", trials=1.5, output=tmp / "p.yaml"),
     "trials: must be a positive integer (got 1.5)"),
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", strategies=[], output=tmp / "p.yaml"),
     "strategies: [] names no strategy"),
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", seed=-1, output=tmp / "p.yaml"),
     "seed: must be an integer from 0 to 2**32 - 1 (got -1)"),
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", output=tmp), "is a folder, not a file"),
    (lambda tmp: gnnplan.whatif("4x-a100-10gbe", "cora-sage", ["num_machines=1,2", "num_machines=3,4"]),
     "field 'num_machines' is varied twice"),
    (lambda tmp: gnnplan.whatif("4x-a100-10gbe", "cora-sage", [], trials=1), "vary: one or more strings"),
    (lambda tmp: gnnplan.whatif("4x-a100-10gbe", "cora-sage", "num_machines=1,2", trials=0),
     "trials: must be a positive integer (got 0)"),
    (lambda tmp: gnnplan.simulate(3, "cora-sage", "dp"), "cluster: a preset name, a YAML path or a ClusterSpec"),
    (lambda tmp: gnnplan.simulate("4x-a100-10gbe", None, "dp"), "workload: a preset name, a YAML path"),
    (lambda tmp: gnnplan.simulate("4x-a100-10gbe", "cora-sage", "dp", [1, 2]), "knobs: a mapping of knob names"),
    (lambda tmp: gnnplan.run(42, nprocs=2, epochs=1), "plan: a Plan, or a plan YAML's path (got int)"),
    (lambda tmp: gnnplan.run("plan.yaml", nprocs="2", epochs=1), "nprocs: must be a positive integer (got '2')"),
    (lambda tmp: gnnplan.run("plan.yaml", nprocs=2, epochs=0), "epochs: must be a positive integer (got 0)"),
    (lambda tmp: gnnplan.run("plan.yaml", nprocs=2, trace_dir=__file__), "is a file, not a folder"),
    (lambda tmp: gnnplan.simulate_on_draws("4x-a100-10gbe", "cora-sage", "dp", {}, []), "refs: one or more strings"),
    # from a new user's pass over the API (2026-12-01): switches, paths, texts and counts of the wrong kind
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", allow_model_change="false", output=tmp / "p.yaml"),
     "allow_model_change: True or False (got 'false')"),
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", storage=5, output=tmp / "p.yaml"),
     "storage: a non-empty string or None (got 5)"),
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", study_name=["a"], output=tmp / "p.yaml"),
     "study_name: a non-empty string or None (got ['a'])"),
    (lambda tmp: gnnplan.tune("4x-a100-10gbe", "cora-sage", output=None), "output: a path (str or Path) (got None)"),
    (lambda tmp: gnnplan.whatif("4x-a100-10gbe", "cora-sage", "num_machines=1,2", output=5),
     "output: a path (str or Path) or None (got 5)"),
    (lambda tmp: gnnplan.load_plan({"strategy": "dp"}), "plan: a plan YAML's path (got dict)"),
    (lambda tmp: gnnplan.run("plan.yaml", trace_dir=None), "trace_dir: a path (str or Path) (got None)"),
    (lambda tmp: gnnplan.run("plan.yaml", collective_timeout_s="60"),
     "collective_timeout_s: must be a positive number of seconds (got '60')"),
    (lambda tmp: gnnplan.run("plan.yaml", checkpoint_every=1.5), "checkpoint_every: must be an integer >= 0"),
    (lambda tmp: gnnplan.run("plan.yaml", checkpoint_every=True), "checkpoint_every: must be an integer >= 0"),
    (lambda tmp: gnnplan.run("plan.yaml", resume="no"), "resume: True or False (got 'no')"),
    (lambda tmp: gnnplan.simulate("4x-a100-10gbe", "cora-sage", "dp", {"batch_size": 2}),
     "knobs: batch_size: 2 is smaller than the 4 workers"),  # the knob, not the workload's training.batch_size
    (lambda tmp: gnnplan.whatif("4x-a100-10gbe", "cora-sage", ["num_machines=1,2"], cluster_set=["gpu=3"], trials=1),
     "cluster_set: gpu: Input should be a valid dictionary"),  # it said "vary: gpu: ..."
])
def test_the_api_checks_its_arguments_as_the_cli_does(call: Any, needle: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        call(tmp_path)
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "p.yaml").exists()


def test_specs_and_knobs_edited_in_python_are_checked_again_before_use(tmp_path: Path) -> None:
    """``model_copy(update=...)`` does not validate: an edited knob (``sampler="zzz"``) was simulated and an
    edited plan (0 machines) ran (2026-12-01)."""
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.strategies import get_strategy
    from gnnplan.simulator.workload.spec import load_workload

    knobs = get_strategy("dp").Knobs().model_copy(update={"sampler": "zzz"})
    with pytest.raises(SpecError, match=r"^knobs: sampler='zzz' is invalid for strategy dp; sampler must be one of "):
        gnnplan.simulate("4x-a100-10gbe", "cora-sage", "dp", knobs)
    with pytest.raises(SpecError, match=r"^knobs: unknown knob 'bogus' for strategy dp"):
        gnnplan.simulate("4x-a100-10gbe", "cora-sage", "dp", get_strategy("dp").Knobs().model_copy(
            update={"bogus": 1}))
    one = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1, "gpus_per_machine": 1})
    plan = Plan(strategy="dp", knobs={}, num_workers=1, cluster=one, workload=load_workload("cora-sage"))
    broken = plan.model_copy(update={"cluster": one.model_copy(update={"num_machines": 0})})
    with pytest.raises(SpecError, match=r"^plan: cluster.num_machines: Input should be greater than or equal to 1"):
        gnnplan.run(broken, trace_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_api_calibrates_an_in_memory_trace_as_a_file_of_it(tmp_path: Path) -> None:
    """``calibrate({name: (spans, metadata)})`` is checked as the file form: the pair's shape, the schema and the
    source (it fitted a simulated trace, or failed with a TypeError, 2026-12-01)."""
    from gnnplan.simulator.api import predicted_trace, trace_metadata
    from gnnplan.simulator.trace import read_trace

    res = gnnplan.simulate("4x-a100-10gbe", "cora-sage", "dp")
    path = predicted_trace(res, tmp_path / "p.json", trace_metadata("4x-a100-10gbe", "cora-sage", "dp", res))
    spans, meta = read_trace(path)
    with pytest.raises(SpecError, match="^traces p: this trace was written by the simulator, not the executor"):
        gnnplan.calibrate({"p": (spans, meta)}, "4x-a100-10gbe")
    for traces, message in (({"t": 5}, "^trace t: must be \\(spans, metadata\\)"), ({3: (spans, meta)},
                            "^traces: a trace's name must be a non-empty string \\(got 3\\)"),
                            ({"t": (spans + ["x"], meta)}, "^trace t: must be"), ({}, "^traces: no trace given")):
        with pytest.raises(SpecError, match=message):
            gnnplan.calibrate(traces, "4x-a100-10gbe")
    bad = dict(meta, source="executor", plan={**meta["plan"], "num_workers": 0})
    with pytest.raises(SpecError, match=r"^trace t: metadata.plan: num_workers: Input should be greater"):
        gnnplan.calibrate({"t": (spans, bad)}, "4x-a100-10gbe")


def test_the_api_reads_one_comma_separated_string_as_a_list(tmp_path: Path) -> None:
    out = gnnplan.tune("4x-a100-10gbe", "cora-sage", strategies="dp", trials=1, storage=f"sqlite:///{tmp_path}/s.db",
                       output=tmp_path / "p.yaml")
    assert {r["strategy"] for r in out["ranked"]} == {"dp"}


def test_the_api_calibrates_measured_traces_only(tmp_path: Path) -> None:
    from gnnplan.simulator.api import predicted_trace, trace_metadata

    res = gnnplan.simulate("4x-a100-10gbe", "cora-sage", "dp")
    path = predicted_trace(res, tmp_path / "p.json", trace_metadata("4x-a100-10gbe", "cora-sage", "dp", res))
    with pytest.raises(SpecError, match="this trace was written by the simulator, not the executor"):
        gnnplan.calibrate(str(path), "4x-a100-10gbe")  # one path as a string is one trace, not its characters


def test_api_errors_from_shared_code_name_the_argument_not_the_flag(tmp_path: Path) -> None:
    """Checks the CLI shares with the API name a flag (``--storage``); raised through the API they name the
    argument the caller gave (api_args.as_arguments), one line, same class."""
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.workload.spec import load_workload

    with pytest.raises(SpecError, match=r"^storage: cannot open 'bogus://x'") as exc:
        gnnplan.tune("4x-a100-10gbe", "cora-sage", trials=1, storage="bogus://x", output=tmp_path / "p.yaml")
    assert "--" not in str(exc.value) and "sqlite:///PATH" in str(exc.value)  # what a storage URL looks like
    one = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1, "gpus_per_machine": 1})
    plan = Plan(strategy="dp", knobs={}, num_workers=1, cluster=one, workload=load_workload("cora-sage"))
    with pytest.raises(SpecError, match=r"^collective_timeout_s: must be a positive number of seconds"):
        gnnplan.run(plan, collective_timeout_s=-1.0, trace_dir=tmp_path)
    with pytest.raises(SpecError, match=r"^resume=True: .* holds no checkpoints"):
        gnnplan.run(plan, resume=True, checkpoint_dir=tmp_path, trace_dir=tmp_path)
    with pytest.raises(SpecError, match=r"^vary: unknown field 'nofield'"):
        gnnplan.whatif("4x-a100-10gbe", "cora-sage", ["nofield=1,2"], trials=1)
    with pytest.raises(SpecError, match=r"^proxy_draws: needs a dataset card"):
        gnnplan.whatif("4x-a100-10gbe", "cora-sage", ["num_machines=1,2"], trials=1, proxy_draws=2)
    for call in (gnnplan.tune, gnnplan.whatif):
        args = ("4x-a100-10gbe", "cora-sage") + (() if call is gnnplan.tune else (["num_machines=1,2"],))
        with pytest.raises(SpecError, match=r"^strategies: unknown strategy 'nope'; allowed: dp, "):
            call(*args, strategies=["nope"], trials=1)
    with pytest.raises(SpecError, match=r"^traces: file .* does not exist"):
        gnnplan.calibrate([tmp_path / "none.json"], "4x-a100-10gbe")
    (tmp_path / "bare.json").write_text('{"traceEvents": []}')  # the CLI's TRACE arguments (2026-11-30: "TRACE:")
    with pytest.raises(SpecError, match=r"^traces: '.*bare.json' is given twice; give each trace once"):
        gnnplan.calibrate([tmp_path / "bare.json", tmp_path / "bare.json"], "4x-a100-10gbe")
    with pytest.raises(SpecError, match=r"^traces bare.json: no 'plan' in its metadata; give a trace written by"):
        gnnplan.calibrate([tmp_path / "bare.json"], "4x-a100-10gbe")


def test_the_api_run_warns_where_the_run_is_not_the_plans_configuration(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The notes gnnplan run prints (another layout, a GPU plan without CUDA) reach an API caller as RunNote
    warnings (2026-11-30: silent); the plan's own layout is the default, as the CLI's. run_plan is a fake."""
    from gnnplan.executor import run_notes, runner
    from gnnplan.executor.run_notes import RunNote
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.workload.spec import load_workload

    layouts = []
    monkeypatch.setattr(runner, "run_plan", lambda plan, **kw: layouts.append(kw["gpus_per_machine"]) or {})
    monkeypatch.setattr(run_notes, "has_cuda", lambda: False)  # as here and in CI
    two = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1, "gpus_per_machine": 2})
    plan = Plan(strategy="dp", knobs={}, num_workers=2, cluster=two, workload=load_workload("cora-sage"))
    with pytest.warns(RunNote) as caught:
        gnnplan.run(plan, gpus_per_machine=1, trace_dir=tmp_path)
    notes = [str(w.message) for w in caught]
    assert notes[0].startswith("running as 2 machines x 1 worker; the plan was tuned for 1 machine x 2 GPUs")
    assert notes[1].startswith("the plan is for 4x-a100-10gbe's A100-SXM4-40GB GPUs and this machine has no CUDA")
    with pytest.warns(RunNote) as caught:
        got = gnnplan.run(plan, trace_dir=tmp_path)  # the plan's layout: only the device note
    assert len(caught) == 1 and layouts == [1, 2]
    assert got["notes"] == [str(caught[0].message)] and got["predicted_epoch_time_s"] is None  # no CUDA here
    cpu = plan.model_copy(update={"cluster": two.model_copy(update={"gpu": two.gpu.model_copy(
        update={"is_host_cpu": True})}), "prediction": {"epoch_time_s": 0.05}})
    got = gnnplan.run(cpu, trace_dir=tmp_path)  # a plan without the digest of 2026-12-01: taken as it is
    assert got["predicted_epoch_time_s"] == 0.05 and got["notes"] == []


def test_specs_built_in_python_are_checked_like_files() -> None:
    """A cluster or workload edited with model_copy (which pydantic does not validate) is validated before use,
    misspelt keys included, as a YAML file is; a workload may be a mapping; cluster_set changes a field unit-aware
    (2026-12-01, a new user's pass: ZeroDivisionError, TypeError, or a 0 s epoch)."""
    cl = gnnplan.load_cluster("4x-a100-10gbe")
    wl = gnnplan.load_workload("cora-sage")

    def net(**kw: Any) -> Any:
        return cl.model_copy(update={"network": cl.network.model_copy(update=kw)})

    bad = [(cl.model_copy(update={"gpus_per_machine": 0}), "^cluster: gpus_per_machine: Input should be greater"),
           (net(bandwidth_bytes_per_s=-1.0), "^cluster: network.bandwidth_bytes_per_s: Input should be greater"),
           (cl.model_copy(update={"num_gpus_per_machine": 2}), "^cluster: num_gpus_per_machine: unknown field; "
                                                               "allowed: name, num_machines, gpus_per_machine,")]
    for spec, match in bad:
        with pytest.raises(gnnplan.SpecError, match=match):
            gnnplan.simulate(spec, wl, "dp")
    by_hand = gnnplan.simulate(net(bandwidth_bytes_per_s="25Gbit/s"), wl, "dp")
    by_set = gnnplan.simulate(cl, wl, "dp", cluster_set=["network.bandwidth_bytes_per_s=25Gbit/s"])
    assert by_hand.epoch_time_s == by_set.epoch_time_s != gnnplan.simulate(cl, wl, "dp").epoch_time_s
    with pytest.raises(gnnplan.SpecError, match="^cluster_set: unknown field 'network.bandwith"):
        gnnplan.simulate(cl, wl, "dp", cluster_set=["network.bandwith_bytes_per_s=1"])
    data = wl.to_yaml_dict()
    assert gnnplan.simulate(cl, data, "dp").epoch_time_s == gnnplan.simulate(cl, wl, "dp").epoch_time_s
    data["model"]["hiden_dim"] = data["model"].pop("hidden_dim")
    with pytest.raises(gnnplan.SpecError, match="^workload: model.hiden_dim: unknown field; allowed in model: "):
        gnnplan.simulate(cl, data, "dp")
    short = wl.model_copy(update={"training": wl.training.model_copy(update={"batch_size": 0})})
    with pytest.raises(gnnplan.SpecError, match="^workload: training.batch_size: Input should be greater"):
        gnnplan.simulate(cl, short, "dp")
    with pytest.raises(gnnplan.SpecError, match=r"^strategy: unknown strategy \['dp'\]; allowed: dp, "):
        gnnplan.simulate(cl, wl, ["dp"])  # type: ignore[arg-type]
    with pytest.raises(gnnplan.SpecError, match="^stats_seed: must be an integer from 0 to 2"):
        gnnplan.simulate(cl, wl, "dp", stats_seed=-1)
