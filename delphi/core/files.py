"""Reading a file that must be a regular file of bounded size (a ladder, a registry, a key).

Light on purpose (the standard library only): the registry commands use it without loading
the readers' pandas stack.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import DelphiError

__all__ = ["describe_not_a_file", "read_regular_file", "reason"]


def reason(exc: OSError) -> str:
    """An OSError as one short phrase: 'No space left on device [ENOSPC]'."""
    name = errno.errorcode.get(exc.errno or 0)
    return f"{exc.strerror or exc}" + (f" [{name}]" if name else "")


def describe_not_a_file(path: str | os.PathLike) -> str:
    """Why ``path`` is not a regular file, naming what is there instead (a directory, a named
    pipe, a device, a socket, a broken symbolic link, nothing): ``"PATH is a named pipe (FIFO),
    not a regular file"``. Nothing is opened (opening a FIFO for reading blocks)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode               # follows symlinks
    except FileNotFoundError:
        if path.is_symlink():
            return (f"{path} is a broken symbolic link (to {os.readlink(path)}, which does not "
                    f"exist)")
        return f"file not found: {path}"
    except OSError as exc:                       # no permission on a folder, a symlink loop
        return f"cannot access {path}: {exc.strerror or exc}"
    except ValueError:                           # an embedded NUL byte
        return f"{str(path)!r} is not a valid path (it contains a NUL byte)"
    kind = ("a directory" if stat.S_ISDIR(mode) else
            "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else
            "a character device" if stat.S_ISCHR(mode) else
            "a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    via = f" (a symbolic link to {os.path.realpath(path)})" if path.is_symlink() else ""
    return f"{path}{via} is {kind}, not a regular file"


def read_regular_file(path: str | os.PathLike, *, limit: int, what: str,
                      error: type[DelphiError] = DelphiError) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed), at most ``limit`` bytes.

    The path is checked before it is opened (a FIFO or a device is never read: a FIFO would
    block, ``/dev/zero`` never ends), opened without blocking, checked again on the open file
    (it may have been swapped in between) and read to at most ``limit`` bytes.

    Parameters
    ----------
    what: the file's role in messages (``"registry"``, ``"trusted keys"``).
    error: the :class:`~delphi.errors.DelphiError` subclass raised.

    Raises
    ------
    FileNotFoundError
        Nothing is at ``path`` (the caller decides what a missing file means).
    error
        ``path`` is not a regular file (:func:`describe_not_a_file`), is larger than
        ``limit`` bytes, or cannot be read; one line naming the path.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            raise error(f"{what} {describe_not_a_file(path)}") from None
        raise
    except (OSError, ValueError):
        raise error(f"{what} {describe_not_a_file(path)}") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {describe_not_a_file(path)}")
    _check_size(path, st.st_size, limit, what, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {reason(exc)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {describe_not_a_file(path)}")
        _check_size(path, st.st_size, limit, what, error)
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            _check_size(path, size, limit, what, error)   # it grew while being read
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {reason(exc)}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _check_size(path: Path, size: int, limit: int, what: str, error: type[DelphiError]) -> None:
    if size > limit:
        raise error(f"{what} {path} is {size:,} bytes, more than a {what} file can be "
                    f"({limit:,} bytes at most)")
