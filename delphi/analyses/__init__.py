"""Analyses built on the fitting engine: isoFLOP approaches (:mod:`.isoflop`), compute-optimal
allocation (:mod:`.optimal`), ladder planning (:mod:`.planning`), hyperparameter laws
(:mod:`.hparams`) and backtests (:mod:`.backtest`).

Each submodule is imported on its own; this package imports none of them, so
``import delphi`` stays light.
"""
