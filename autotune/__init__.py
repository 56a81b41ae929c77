"""gnnplan's autotuner (Optuna study over strategies and knobs), the closed loop, reports and the CLI."""
