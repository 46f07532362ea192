"""Issue 27 in one run: the peer rows and the guard (``bench_refits``) and the everyday
commands (``bench_interactive``), each ratio against one Epoch ``chinchilla`` fit measured in
the same run, written to the "Issue 27" section of ``benchmarks/RESULTS.md`` with the
machine's load before, between and after.

Usage: python benchmarks/bench_issue27.py [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_interactive  # noqa: E402
import bench_refits  # noqa: E402
from run_all import _load, _table, print_rows, write_section  # noqa: E402

SECTION = "## Issue 27: faster than the peers, measured side by side"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    loads = [("before", _load())]
    refits = bench_refits.run(args.quick)
    print_rows(refits)
    loads.append(("after bench_refits", _load()))
    interactive = bench_interactive.run(args.quick)
    print_rows(interactive)
    loads.append(("after bench_interactive", _load()))
    lines = [SECTION, "",
             f"Written by `python benchmarks/bench_issue27.py{' --quick' if args.quick else ''}` "
             f"on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC in one run of "
             f"{time.perf_counter() - started:.0f} s; {platform.machine()}, Python "
             f"{platform.python_version()}. Machine load (shared with other jobs): "
             + "; ".join(f"{w} {v}" for w, v in loads) + ".", "",
             "Peers, the guard and its audit (`benchmarks/bench_refits.py`; the peers run in "
             "their own Python 3.12 environment, `benchmarks/ssl_bootstrap.py`):", ""]
    lines += _table(refits) + ["", "Everyday commands, fresh `delphi` processes, default "
                               "options (`benchmarks/bench_interactive.py`; judged on CPU "
                               "time, wall time in the note):", ""]
    lines += _table(interactive) + [""]
    if not args.no_write:
        write_section(HERE / "RESULTS.md", SECTION, lines)
        print(f"wrote the section to {HERE / 'RESULTS.md'}")
    else:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
