"""delphi: predict the final loss of a large training run from a ladder of small runs."""

__version__ = "0.1.0"
