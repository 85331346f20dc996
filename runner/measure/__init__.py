"""Measurement primitives with a public API, used by the cell protocol
(``runner.cell``), the backends, the XLA eager-baseline process and the benchmarks:
the subject (model, inputs, precision, device), timing, accuracy, isolation (caches,
TF32, seeds), tensors and failure classification."""
