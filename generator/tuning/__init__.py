"""``gen-repo tune``: the served settings (instances, queue delay, preferred batch sizes) this machine rewards.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
