"""Package list for setuptools: every package under simulator/, executor/ and autotune/, installed below
``gnnplan`` (pyproject.toml holds everything else, including the package-dir mapping)."""

from setuptools import find_packages, setup

ROOTS = ("simulator", "executor", "autotune")

setup(packages=["gnnplan"] + [f"gnnplan.{p}" for p in find_packages(include=[f"{r}*" for r in ROOTS])])
