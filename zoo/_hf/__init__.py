"""Building transformers models from their configs, and making their inputs.

Only building imports this package; ``zoo.hf_suite`` lists the classes without it.
Its modules, each using only those above it:

- ``families``: data: the names configs give a setting, tiny values, and what each
  family needs that the generic rules miss.
- ``settings``: a config as its dict: walking sub-configs, editing, building it back
  without its derived settings, reading a setting wherever it is kept.
- ``hub``: the Hugging Face Hub out of reach while configs and models are made.
- ``depth``: the depth cut (a full-size model built with fewer layers, and every layer
  list cut to match) and counting parameters on the meta device.
- ``configs``: config surgery: a default config that runs, and its tiny version.
- ``inputs``: which keywords a model takes, and a seeded tensor for each.
- ``building``: a spec's recipe, the model built on its device, its example inputs.
"""
