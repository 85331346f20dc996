"""The console commands of the runner, one module each (``zoo-run``: ``run``,
``zoo-export``: ``export``, ``zoo-merge``: ``merge``), thin over library calls; every
one reports errors through ``zoo.errors.run_command``."""
