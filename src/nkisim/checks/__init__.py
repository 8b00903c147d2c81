"""Hardware rules: shared checks (rules), later capacity, races and uninitialised reads. No torch."""
