"""Presentation: figures (``plot``), HTML reports (``report``) and the command line (``cli``).
The top layer: it may import every layer below; none imports it."""
