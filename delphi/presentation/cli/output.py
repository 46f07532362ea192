"""What the ``delphi`` command writes: results on stdout, notes and errors on stderr, and the
JSON contract of ``--json``: every document is printed by :func:`print_json` (or, one record
a line, :func:`json_text`), which adds ``"delphi_version"``; an error is
``{"error": {"type": NAME, "message": TEXT}, "delphi_version": VERSION}``.

Standard library only, so that usage errors answer without importing the fitting stack.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from typing import Sequence

from ... import __version__
from ...errors import DelphiError, for_cli
from ...core.parallel import is_quiet

__all__ = ["note", "wants_json", "json_text", "print_json", "json_error", "OutputError",
           "write_stdout", "print_error", "silence_stdout", "command_stdout"]

#: True while :func:`delphi.cli.main` parses a command line that has ``--json``: usage errors,
#: raised inside argparse before the arguments exist, are then also reported as JSON.
JSON_USAGE_ERRORS = False


#: Where a note's text starts: its continuation lines on a terminal are indented this far.
_NOTE_PREFIX = "delphi: note: "
#: Narrowest width a note is wrapped to (a terminal narrower than this gets this width).
_MIN_WIDTH = 40


def note(text: str) -> None:
    """Print an explanatory note (not a result) on stderr, unless ``--quiet``; a closed
    stderr is ignored (notes are advice, the result still goes to stdout).

    On a terminal (stderr is a TTY) the note is wrapped to the terminal's width (``COLUMNS``
    when set, else the terminal's own size; at least 40 columns), its continuation lines
    indented under the text. Anywhere else (a pipe, a file, a CI log) each note stays on one
    line that starts ``delphi: note:``, so that ``grep note`` finds all of it."""
    if not is_quiet():
        try:
            print(note_text(for_cli(text), terminal_width(sys.stderr)), file=sys.stderr)
        except BrokenPipeError:
            pass


def terminal_width(stream) -> int | None:
    """The width [columns] to wrap text written to ``stream`` to: ``COLUMNS`` when it is a
    positive integer, else the terminal's size, when ``stream`` is a TTY; None when it is not
    a TTY (a pipe or a file: no wrapping)."""
    try:
        if stream is None or not stream.isatty():
            return None
    except (AttributeError, ValueError):        # no isatty, or a closed stream
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


def note_text(text: str, width: int | None) -> str:
    """``delphi: note: TEXT``, wrapped to ``width`` columns (at least 40) with continuation
    lines indented under TEXT; one line when ``width`` is None. Words longer than a line (a
    path) are not broken."""
    line = _NOTE_PREFIX + text
    if width is None or len(line) <= width:
        return line
    return textwrap.fill(text, width=max(width, _MIN_WIDTH), initial_indent=_NOTE_PREFIX,
                         subsequent_indent=" " * len(_NOTE_PREFIX), break_long_words=False,
                         break_on_hyphens=False)



def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or an abbreviation argparse accepts, ``--js``...) is on the command
    line, looked at before parsing so that a usage error can be answered in JSON too."""
    for token in argv:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if len(name) >= 4 and "--json".startswith(name):
            return True
    return False


#: True while a command streams JSON Lines to stdout (``track --follow --json``): an error
#: then closes the stream as one more line, so that every line of it parses.
JSON_LINES = False


def json_text(obj, one_line: bool = False) -> str:
    """``obj`` as the text of one ``--json`` document: indented by 2, or on one line for a
    JSON Lines record (``one_line``). A dict gets the top-level key ``"delphi_version"``
    (:data:`delphi.__version__`, last), unless it records one already (a registry entry
    written by this delphi); a list is printed as it is, nothing added inside it. Every
    record of a JSON Lines stream is a dict and gets the key too: a line is read alone.

    Raises ValueError on a NaN or infinity (``allow_nan=False``): they are not JSON, and a
    command turns them into None (``null``) or an error before printing."""
    if isinstance(obj, dict) and "delphi_version" not in obj:
        obj = {**obj, "delphi_version": __version__}
    return json.dumps(obj, indent=None if one_line else 2, allow_nan=False)


def print_json(obj) -> None:
    """Print ``obj`` as the command's ``--json`` document (:func:`json_text`) on stdout; the
    way every command prints its JSON, so that each document says which delphi made it."""
    print(json_text(obj))


def json_error(kind: str, message: str) -> None:
    """Print ``{"error": {"type": kind, "message": message}, "delphi_version": VERSION}`` on
    stdout (the JSON error contract; on one line when :data:`JSON_LINES`); a reader that has
    gone away, or a stdout that cannot be written, is ignored (the error is also printed on
    stderr)."""
    text = json_text({"error": {"type": kind, "message": for_cli(message)}},
                     one_line=JSON_LINES)
    try:
        print(text, flush=True)
    except OSError:  # BrokenPipeError, or a full / closed stdout
        silence_stdout()


class UsageError(DelphiError):
    """Bad command-line usage found after parsing (e.g. ``delphi predict LADDER`` with no target
    and none in the ladder's manifest): one line on stderr, exit code 2 like argparse's usage
    errors, JSON error type ``UsageError``."""


class OutputError(Exception):
    """stdout cannot take the output (``> /dev/full``: no space left; ``>&-``: closed)."""


#: The stdout in effect when the running command started (:func:`delphi.cli.main._run`
#: collects the command's text output in a buffer meanwhile).
_COMMAND_STDOUT = None


def command_stdout():
    """The real stdout of the running command, for output that must not go through the text
    buffer (a figure written with ``-o -``); None when stdout is closed."""
    return _COMMAND_STDOUT if _COMMAND_STDOUT is not None else sys.stdout


def write_stdout(text: str, flush: bool = False) -> None:
    """Write ``text`` to stdout; raises :class:`OutputError` when stdout is closed or full
    (a BrokenPipeError, a reader that went away, is left to :func:`main`)."""
    if sys.stdout is None:  # Python sets it to None when file descriptor 1 was closed
        if text or flush:
            raise OutputError("stdout is closed")
        return
    try:
        if text:
            sys.stdout.write(text)
        if flush:
            sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(exc.strerror or str(exc)) from None


def print_error(message: str) -> None:
    """``delphi: error: MESSAGE`` on stderr, CLI spelling of any setting it names."""
    try:
        print(f"delphi: error: {for_cli(message)}", file=sys.stderr, flush=True)
    except BrokenPipeError:  # stderr is a closed pipe too: nobody to tell
        pass


def silence_stdout() -> None:
    """Point stdout at /dev/null after its reader went away (``delphi ... | head``), so that
    Python's flush at exit does not print a BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (e.g. captured)
        pass


