"""gnnplan's autotuner (Optuna study over strategies and knobs), the closed loop, reports and the CLI."""

if __name__ != "gnnplan.autotune":  # the folder autotune/ installs as gnnplan.autotune (pyproject.toml, package-dir)
    raise ImportError(f"{__name__}: this folder is the package gnnplan.autotune; import gnnplan.autotune "
                      "(after `pip install -e .`)")

