"""Steps: what one call of a cell is (``runner.steps.registry`` lists them)."""
