"""One module per benchmarked model: the imperative program and its hand-written symbolic baseline."""
