"""Benchmark: the bootstrap guard's rule for draws the batched refinement leaves unfinished
(issue 27 item 2, issue 26's ``predict --curve`` cost).

Before 2026-12-04 every draw the batched refinement did not finish ran the full global search
after its L-BFGS-B finish (``UNFINISHED_RULE = "all"``); on the OLMo ladder's checkpoint law
that was 49 of 200 draws at 1.8 s each, none of them improved. The rule now
(``"failed"``, the default): the finish is polished by trust-region least squares and only a
draw whose polish did not converge, or that the basin check rejects, is searched; a block in
which two suspects' searches improved a draw searches all its unfinished draws, as before.

For each (ladder, law), both rules in this process, seed 0, one worker:

* **default guard**: draws searched, draws improved, CPU seconds of ``bootstrap`` (the ratio
  is the old rule's time over the new one's);
* **audit** (new rule, ``check_every=1``: the global search on every draw): draws the rule did
  not search that the global search improved (``missed``, target 0 on every ladder).

The ladders the rule was designed on are marked "in sample" (the dense ladder's Chinchilla
and power laws, Comma's power law, OLMo's checkpoint law: the cases the rule was tried on);
the others were not looked at before the rule was fixed ("held out").

Usage: python benchmarks/bench_guard_unfinished.py [--quick]  (--quick: in-sample rows only)
"""

from __future__ import annotations

import argparse
import time
import warnings

from threadpoolctl import threadpool_limits

#: (ladder, law, in sample or held out, draws of the default guard, draws of the audit)
CASES = [("marin-delphi-dense", "power", "in sample", 200, 200),
         ("marin-delphi-dense", "chinchilla", "in sample", 200, 200),
         ("marin-isoflop-comma", "power", "in sample", 200, 200),
         ("olmo-ladder", "chinchilla-ckpt", "in sample", 200, 60),
         ("misfitting2025-final", "chinchilla-lr", "held out", 200, 200),
         ("misfitting2025-final", "chinchilla-lr-asym", "held out", 200, 200),
         ("gadre2024", "overtrain", "held out", 200, 200),
         ("marin-delphi-dense", "overtrain", "held out", 200, 200),
         ("porian2024-owt2", "chinchilla", "held out", 200, 200),
         ("openathena-isoflops", "power", "held out", 200, 200),
         ("marin-moe-535b", "power", "held out", 200, 200),
         ("olmo-ladder", "chinchilla", "held out", 200, 200),
         ("epoch-chinchilla", "power", "held out", 200, 200),
         ("misfitting2025-final", "chinchilla", "held out", 200, 200)]


def run(quick: bool = False) -> list[dict]:
    import delphi
    from delphi.forecasting import uncertainty as U
    from delphi.readers import load_ladder

    rows = []
    for name, law, sample, n, n_audit in CASES:
        if quick and sample != "in sample":
            continue
        row = {"ladder": name, "law": law, "sample": sample, "n": n, "n_audit": n_audit}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fit = delphi.fit(load_ladder(name), law)
                for rule in ("all", "failed"):
                    U.UNFINISHED_RULE = rule
                    t0 = time.process_time()
                    d = U.bootstrap(fit, n=n, seed=0, n_jobs=1)
                    row[rule] = (d.n_searched, d.n_worse, time.process_time() - t0)
                U.UNFINISHED_RULE = "failed"
                a = U.bootstrap(fit, n=n_audit, seed=0, n_jobs=1, check_every=1)
                row["missed"], row["audit_worse"] = a.n_missed, a.n_worse
            except delphi.DelphiError as exc:
                row["error"] = str(exc)[:120]
            finally:
                U.UNFINISHED_RULE = "failed"
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(r: dict) -> str:
    head = f"| {r['ladder']} | {r['law']} | {r['sample']} |"
    if "error" in r:
        return f"{head} - | - | - | - | - | {r['error']} |"
    (s0, w0, t0), (s1, w1, t1) = r["all"], r["failed"]
    ok = "yes" if r["missed"] == 0 else "**no**"
    return (f"{head} {s0} / {w0} / {t0:.2f} s | {s1} / {w1} / {t1:.2f} s | {t0 / t1:.2f}x | "
            f"{r['missed']} of {r['n_audit']} ({r['audit_worse']} improved in all) | {ok} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print("| ladder | law | sample | old rule: searched / improved / CPU | new rule: searched / "
          "improved / CPU | old / new | audit: missed by the new rule | met |")
    print("|---|---|---|---|---|---|---|---|")
    with threadpool_limits(1):
        run(args.quick)


if __name__ == "__main__":
    main()
