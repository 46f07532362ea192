"""Run every benchmark of issue 8 and write ``benchmarks/RESULTS.md``.

Each benchmark module has ``run(quick=False) -> list[dict]`` whose rows give a figure, the
baseline it is compared with (measured in the same run, same process unless it says
otherwise), their ratio and the target. The machine's load is recorded before and after:
ratios hold up under load better than absolute times, but both drift on a busy machine.

Usage: python benchmarks/run_all.py [--quick] [--only NAME ...] [--out PATH]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: (module, what it measures), in the order of issue 8's items.
BENCHMARKS = [
    ("bench_refits", "items 1 and 6: warm-started bootstrap refits; the exact Epoch optimum"),
    ("bench_curves", "item 3: curve laws without Python loops"),
    ("bench_import", "item 4: start-up time"),
    ("bench_large", "item 5: large ladders"),
    ("curve_completion", "item 3: (Mis)Fitting completion at 50% with multipower on every run"),
    ("bench_calibration", "issue 11, item 5: calibrated intervals, auto and ensemble, every "
                          "public ladder (leave-future-out)"),
    ("bench_accuracy", "issue 13, item 6: task accuracy, OLMo ladder 190M-760M -> 1B/3B"),
    ("bench_coverage", "issue 20: interval coverage over simulated ladders (issues 4 and 11, "
                       "moved from the unit tests)"),
    ("bench_interactive", "issue 27: the everyday commands against one Epoch fit"),
]


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min), {os.cpu_count()} cores"


def _fmt(value, unit="") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.4g}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def _table(rows: list[dict]) -> list[str]:
    out = ["| benchmark | figure | value | baseline | baseline value | ratio | target | met | note |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['ratio']:.3g}x" if isinstance(r.get("ratio"), (int, float)) else "-"
        met = {True: "yes", False: "**no**", None: "-"}[r.get("met")]
        note = str(r.get("note", "")).replace("|", "/").replace("\n", " ")
        out.append(f"| {r['benchmark']} | {r['figure']} | {_fmt(r['value'], r.get('unit', ''))} | "
                   f"{r.get('baseline') or '-'} | "
                   f"{_fmt(r.get('baseline_value'), r.get('unit', ''))} | {ratio} | "
                   f"{r.get('target') or '-'} | {met} | {note} |")
    return out


def print_rows(rows: list[dict]) -> None:
    """One line per benchmark row: figure, value, ratio to its baseline, target, note."""
    for r in rows:
        ratio = f"{r['ratio']:.3g}x" if isinstance(r.get("ratio"), (int, float)) else "-"
        print(f"  {r['figure']}: {_fmt(r['value'], r.get('unit', ''))}, ratio {ratio} "
              f"(target {r.get('target') or '-'}, met: {r.get('met')}) {r.get('note', '')}",
              flush=True)


#: Everything from this line on in RESULTS.md is kept when the file is rewritten.
KEEP = "<!-- kept by run_all.py: analyses written by hand below -->"


def write_section(path: Path, section: str, lines: list[str]) -> None:
    """Put ``lines`` below the :data:`KEEP` marker of ``path`` (RESULTS.md), replacing an
    earlier section headed ``section`` (up to the next ``## `` heading) or appending it at
    the end. RuntimeError when the file has no marker."""
    text = path.read_text(encoding="utf-8")
    if KEEP not in text:
        raise RuntimeError(f"{path} has no marker {KEEP!r}")
    head, kept = text.split(KEEP, 1)
    block = "\n".join(lines).rstrip() + "\n"
    if section in kept:
        before, rest = kept.split(section, 1)
        nxt = rest.find("\n## ")
        after = rest[nxt + 1:] if nxt >= 0 else ""
        kept = before + block + ("\n" + after if after else "")
    else:
        kept = kept.rstrip() + "\n\n" + block
    path.write_text(head + KEEP + kept, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller baselines and sizes (extrapolated where it says so)")
    parser.add_argument("--only", nargs="*", help="module names to run (default: all)")
    parser.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = parser.parse_args()

    import numpy
    import pandas
    import scipy
    load_before = _load()
    started = time.perf_counter()
    sections = []
    failed = 0
    for name, what in BENCHMARKS:
        if args.only and name not in args.only:
            continue
        print(f"== {name}: {what}", flush=True)
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(name)
            kwargs = {"quick": args.quick} if "quick" in inspect.signature(module.run).parameters \
                else {}
            rows = module.run(**kwargs)
        except Exception:  # report and go on: one broken benchmark must not hide the others
            failed += 1
            sections.append((name, what, None, traceback.format_exc(), 0.0, _load()))
            print(traceback.format_exc(), flush=True)
            continue
        print_rows(rows)
        sections.append((name, what, rows, "", time.perf_counter() - t0, _load()))

    lines = ["# Benchmark results", "",
             f"Written by `python benchmarks/run_all.py{' --quick' if args.quick else ''}` on "
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.", "",
             f"- machine: {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, numpy {numpy.__version__}, scipy {scipy.__version__}, "
             f"pandas {pandas.__version__}",
             f"- load before: {load_before}",
             f"- load after: {_load()}",
             f"- total time: {time.perf_counter() - started:.0f} s", "",
             "Every ratio compares two figures measured in the same run. No timed assertion "
             "lives in the unit tests; these targets are checked here.", ""]
    for name, what, rows, error, seconds, load in sections:
        lines += [f"## {what} (`benchmarks/{name}.py`)", "",
                  f"Ran in {seconds:.0f} s; load afterwards {load}.", ""]
        if rows is None:
            lines += ["The benchmark failed:", "", "```", error.strip(), "```", ""]
        else:
            lines += _table(rows) + [""]
    out = Path(args.out)
    # Hand-written analyses (issue 11's tables and their discussion) sit below KEEP: kept.
    old = out.read_text() if out.exists() else ""
    kept = old[old.index(KEEP):] if KEEP in old else ""
    out.write_text("\n".join(lines) + "\n" + (("\n" + kept) if kept else ""))
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
