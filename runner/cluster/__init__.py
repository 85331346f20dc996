"""Running a sweep over a cluster: the driver's executor and the actor on each node."""
