"""Apply a staged batch to its target: the MERGE SQL, row deltas, primary-key moves, the write modes."""
