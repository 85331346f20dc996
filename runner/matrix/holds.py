"""The kinds of hold on a GPU's lock (``runner.schedule.gpu_lock``), by what they do.

- timing: a cell's timed calls, exclusive;
- untimed: GPU work that is not timed but must not run beside a neighbour's timing or
  tuning (the fp64 reference, the eager outputs, the warm-up, the peak-memory pass),
  shared with other untimed work;
- tuning: autotuners that time kernels while compiling (Inductor's benchmarking, XLA's
  compile), exclusive, yielding to the two others.
"""

from __future__ import annotations

TIMING = "timing"
TUNING = "tuning"
UNTIMED = "untimed"
HOLD_KINDS = (TIMING, TUNING, UNTIMED)
