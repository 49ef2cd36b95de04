"""The one error hierarchy of carbguard.

::

    GuardError (Exception)
    ├── PolicyError (ValueError)        a policy file is missing, malformed or inconsistent
    ├── ArtifactError (ValueError)      a calibration artifact is unreadable, edited or mismatched
    ├── CalibrationError (ValueError)   the calibration rule cannot be applied (e.g. alpha < B/(n+1))
    ├── CorpusError (ValueError)        a corpus folder or file cannot be used
    ├── InputError (ValueError)         a proposal or result the guard does not understand
    │   └── BindingError                an execution asked for something other than what was decided
    └── AuditError (OSError)            the audit log cannot be written or does not verify

Every message names the file, key path, field or value that is wrong and, where it can, what
would be right.  All errors derive from :class:`Exception`, never :class:`BaseException`, so an
``except Exception`` in the fail-closed path catches everything the guard raises.
"""

from __future__ import annotations


class GuardError(Exception):
    """Base class of every error carbguard raises on purpose."""


class PolicyError(GuardError, ValueError):
    """A policy file is missing, malformed, or inconsistent."""


class ArtifactError(GuardError, ValueError):
    """A calibration artifact is unreadable, tampered with, or does not match the pipeline."""


class CalibrationError(GuardError, ValueError):
    """The calibration rule cannot be applied to the data given."""


class CorpusError(GuardError, ValueError):
    """A corpus folder or file cannot be used."""


class InputError(GuardError, ValueError):
    """A proposal, result or user turn that the guard does not understand."""


class AuditError(GuardError, OSError):
    """The audit log cannot be written, or it does not verify."""


class BindingError(InputError):
    """An execution was asked for a call other than the exact one that received ``execute``.

    Raised by :meth:`guard.session.Session.authorize` when the call id has no ``execute`` decision,
    the tool or the canonical arguments differ from those decided, or the call already ran.
    """


__all__ = [
    "ArtifactError",
    "AuditError",
    "BindingError",
    "CalibrationError",
    "CorpusError",
    "GuardError",
    "InputError",
    "PolicyError",
]
