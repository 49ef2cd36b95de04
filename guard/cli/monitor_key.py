"""The key that authenticates ``carbguard monitor``'s state file of an unkeyed audit log (docs/monitoring.md).

The state carries the monitors' tally, so whoever could write it unchecked could change a result.
A keyed log's state is MAC'ed under the deployment key (``--key-file``).  For an unkeyed log the
monitor keeps a key of its own next to the state, ``STATE.key``: 32 random bytes, created on the
first run with mode ``0600`` (written to a temporary file and linked into place, so a reader sees
no part of it and an existing file is never overwritten).  It is used only when it is a regular
file (not a symlink) owned by the user running the monitor, readable and writable by that user
alone, and 32 bytes long; otherwise the run warns, reads the whole log, and neither reads nor
writes a state.  Not covered: whoever runs as that user can read the key (and could edit the log
itself: an unkeyed log is not protected against its own writer, docs/audit.md).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

KEY_SUFFIX = ".key"
KEY_BYTES = 32


class KeyFileError(Exception):
    """The state's key file cannot be used; the message says why."""


def key_path(state: Path) -> Path:
    """Where the key of ``state`` lives: ``STATE.key``."""
    return Path(f"{state}{KEY_SUFFIX}")


def _read(path: Path) -> bytes:
    """The key in ``path``; FileNotFoundError if there is none, KeyFileError if it cannot be trusted."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:  # a symlink (ELOOP), a folder, no permission
        raise KeyFileError(f"key file {path} cannot be opened ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise KeyFileError(
                f"key file {path} is not a regular file of yours with mode 0600 (another user could have made or "
                "read it); remove it and run again"
            )
        key = handle.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"key file {path} does not hold {KEY_BYTES} bytes; remove it and run again")
    return key


def _create(path: Path) -> None:
    """A fresh key at ``path`` (mode 0600), linked into place; FileExistsError if one appeared meanwhile."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def state_key(state: Path) -> bytes:
    """The key of ``state`` (created if there is none yet); KeyFileError saying why it cannot be used."""
    path = key_path(state)
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    try:
        _create(path)
    except FileExistsError:  # another run created it first: use that one
        pass
    except OSError as exc:
        raise KeyFileError(f"key file {path} cannot be created ({exc.strerror or exc})") from None
    try:
        return _read(path)
    except FileNotFoundError:
        raise KeyFileError(f"key file {path} vanished while it was created") from None


__all__ = ["KEY_BYTES", "KEY_SUFFIX", "KeyFileError", "key_path", "state_key"]
