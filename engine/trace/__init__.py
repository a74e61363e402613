"""Timing zones: one columnar trace model (``model``), its queries (``query``), statistics (``stats``),
and readers/writers for Chrome trace JSON, IREE's HAL profiles and compile timing."""
