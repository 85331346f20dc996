"""Scheduling cells on a host: worker processes (``worker``), the executor that feeds
them (``executor``), one lock per GPU (``gpu_lock``), where their threads run
(``cpus``) and what bounded a run (``usage``)."""
