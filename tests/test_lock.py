"""requirements.lock and pyproject.toml agree: every dependency pyproject.toml declares (the project's,
the test extra's and the build backend) is pinned in the lock at a version its range admits, every pin
carries hashes, the lock is closed under the pinned packages' own requirements, and the environment
the tests run in is the lock's."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", re.M)


def _lock() -> tuple[dict[str, Version], dict[str, int]]:
    text = (REPO / "requirements.lock").read_text(encoding="utf-8")
    pins: dict[str, Version] = {}
    hashes: dict[str, int] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = PIN.match(block)
        if m:
            name = canonicalize_name(m.group(1))
            pins[name] = Version(m.group(2))
            hashes[name] = len(re.findall(r"--hash=sha256:[0-9a-f]{64}", block))
    return pins, hashes


def _declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    reqs = list(project["project"]["dependencies"])
    reqs += project["project"]["optional-dependencies"]["test"]
    reqs += project["build-system"]["requires"]
    return [Requirement(r) for r in reqs]


def test_every_declared_dependency_is_pinned_within_its_range():
    pins, _ = _lock()
    for req in _declared():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is declared in pyproject.toml but not in requirements.lock"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {name}=={pins[name]}, outside pyproject.toml's {req}: run scripts/lock.sh"
        )


def test_every_pin_has_hashes():
    _, hashes = _lock()
    assert hashes
    assert not [n for n, k in hashes.items() if k == 0]


def test_the_lock_is_closed_and_is_the_environment():
    """Each pinned package's own requirements (for this platform, no extras) are pinned too, within
    their ranges; and the installed versions are the pinned ones (setup.sh installs exactly the lock)."""
    pins, _ = _lock()
    for name, version in pins.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name}=={version} is in the lock but not installed: run scripts/setup.sh")
        assert Version(dist.version) == version, f"{name}: installed {dist.version}, locked {version}"
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            assert dep in pins, f"{name} needs {req}, which requirements.lock does not pin"
            assert req.specifier.contains(pins[dep], prereleases=True), f"{name} needs {req}, lock has {pins[dep]}"
