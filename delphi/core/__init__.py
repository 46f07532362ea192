"""Core utilities every layer may use: message text, typed-record helpers, bounded file reads
and parallel jobs. Standard library and numpy only; imports nothing else of delphi but
``delphi.errors``."""
