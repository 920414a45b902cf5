"""Repository folders and buckets: staging, the lock file, verify, the build cache, object storage, publish.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""

from generator.repository.lock import lock_problems

__all__ = ["lock_problems"]
