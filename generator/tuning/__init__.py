"""``gen-repo tune``: the served settings (instances, queue delay, preferred batch sizes) this machine rewards.

- :mod:`~generator.tuning.space`: what may vary and what never does; a setting's neighbours, the grid, the config
  override a candidate is loaded with;
- :mod:`~generator.tuning.measure`: one candidate loaded and measured in windows until they agree;
- :mod:`~generator.tuning.search`: the hill climb, bounded in time, stopped by the noise;
- :mod:`~generator.tuning.run`: a whole tune on one server; :mod:`~generator.tuning.results`: its report;
- :mod:`~generator.tuning.manifest_block`: the ``tuned:`` blocks written into the manifest.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
