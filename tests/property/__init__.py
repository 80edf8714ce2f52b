"""Property tests (hypothesis) of the scheduling core's invariants."""
