"""The public surface of ``guard`` (STYLE 10): ``__all__`` is explicit, complete and importable."""

from __future__ import annotations
import __future__

import inspect
import tomllib
import types
from pathlib import Path

import guard
from guard.errors import GuardError

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "ArtifactError",
    "AuditError",
    "CalibrationError",
    "CorpusError",
    "Decision",
    "Episode",
    "Guard",
    "GuardError",
    "InputError",
    "Mode",
    "Policy",
    "PolicyError",
    "ProbeCall",
    "Reason",
    "Record",
    "Session",
    "Verdict",
    "__version__",
    "load_policy",
}


def test_all_is_the_expected_surface() -> None:
    """``guard.__all__`` names exactly the documented public API."""
    assert set(guard.__all__) == EXPECTED
    assert len(guard.__all__) == len(set(guard.__all__))


def test_all_is_sorted() -> None:
    """``__all__`` is kept sorted so additions are easy to review."""
    assert list(guard.__all__) == sorted(guard.__all__)


def test_every_exported_name_exists() -> None:
    """Every name in ``__all__`` is an attribute of the package."""
    assert all(hasattr(guard, name) for name in guard.__all__)


def test_no_public_name_left_out_of_all() -> None:
    """Every public, non-module attribute of ``guard`` is listed in ``__all__``."""
    public = {
        name
        for name, value in vars(guard).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType | __future__._Feature)
    }
    assert public <= set(guard.__all__)


def test_exported_members_belong_to_guard() -> None:
    """Exported classes and functions are defined inside the ``guard`` package."""
    for name in guard.__all__:
        value = getattr(guard, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.split(".")[0] == "guard", name


def test_exported_errors_share_one_base() -> None:
    """Every exported error derives from GuardError and Exception, so ``except Exception`` catches it."""
    errors = [getattr(guard, n) for n in guard.__all__ if n.endswith("Error")]
    assert errors
    assert all(issubclass(e, GuardError) and issubclass(e, Exception) for e in errors)


def test_version_matches_pyproject() -> None:
    """``guard.__version__`` is the distribution's version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert guard.__version__ == project["version"]
