"""Packaging beyond what pyproject.toml can say: the top-level ``resources/`` folder (sample programs and
other files the application ships that are not code) is installed as the package data of
``engine.resources``, so an installed wheel finds it where a checkout keeps it beside ``engine/``."""

from setuptools import find_packages, setup

setup(
    # Data folders are packages to setuptools (importable names): resources/samples is one too.
    packages=[*find_packages(include=["app", "app.*", "engine", "engine.*"]), "engine.resources", "engine.resources.samples"],
    package_dir={"engine.resources": "resources"},
    package_data={"": ["*.json", "*.mlir"]},
)
