"""Dispatch data: typed tensors of each dispatch, their statistics and comparison, capture bundles,
the first-divergence finder and the dispatch dependency graph. Plain Python and numpy; no Qt."""
