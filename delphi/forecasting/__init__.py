"""Forecasting: the target, the point forecast (:func:`~delphi.forecasting.forecast.predict`),
its intervals (bootstrap, delta method, calibration on the ladder's own leave-future-out
errors, the reference class of public ladders), law selection (``compare``, ``law="auto"``),
robustness checks and run completion. Builds on ``inputs``, ``laws`` and ``fitting``."""
