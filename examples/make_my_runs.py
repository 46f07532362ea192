"""Write ``examples/my_runs.csv``: the tidy CSV the README's examples use.

Synthetic, so that it can ship with delphi: 27 runs on nine compute budgets (3e18..3e20 FLOPs,
three sizes each), plus two runs at 1e21 that ``--fit-max-flops 3e20`` leaves out), whose
final losses follow Besiroglu et al. 2024's refit of Chinchilla's law (arXiv 2404.10102, Table 1:
E = 1.8172, A = 482.01, B = 2085.43, alpha = 0.3478, beta = 0.3658) with C = 6ND and 0.3%
log-normal run noise (seed 0). Run it to regenerate the file: ``python examples/make_my_runs.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

E, A, B, ALPHA, BETA = 1.8172, 482.01, 2085.43, 0.3478, 0.3658


def main() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for flops in (3e18, 6e18, 1e19, 2e19, 3e19, 6e19, 1e20, 2e20, 3e20, 1e21):
        sizes = (0.5, 1.0, 2.0) if flops < 1e21 else (0.7, 1.4)
        for k in sizes:
            params = k * (flops / 120) ** 0.5          # about 20 tokens per parameter at k = 1
            tokens = flops / (6 * params)
            loss = E + A * params ** -ALPHA + B * tokens ** -BETA
            loss *= np.exp(0.003 * rng.standard_normal())
            rows.append({"run": f"C{flops:.0e}-N{params:.3g}", "params": round(params),
                         "tokens": round(tokens), "flops": flops, "loss": round(loss, 4)})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    out = Path(__file__).with_name("my_runs.csv")
    main().to_csv(out, index=False)
    print(f"wrote {out}")
