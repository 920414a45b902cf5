"""Repository folders and buckets: staging, the lock file, verify, the build cache, object storage, publish.

- :mod:`~generator.repository.staging`: a repository written atomically (staging, one swap, dead writers' leftovers);
- :mod:`~generator.repository.files`: the durable file operations under it (renameat2, fsync, flock, deferred signals);
- :mod:`~generator.repository.lock`: the lock file (``lock_problems``, the one definition of a valid lock that verify
  and publish share, is this package's documented name);
- :mod:`~generator.repository.verify`: a repository (a folder or a bucket) checked against its lock file;
- :mod:`~generator.repository.digest`: the sha256 of bytes, files and streams, as locks and the cache record it;
- :mod:`~generator.repository.bytecode`: ``__pycache__`` checked against its locked source;
- :mod:`~generator.repository.cache`: the content-addressed build cache (the same durable file operations);
- :mod:`~generator.repository.storage_urls`, :mod:`~generator.repository.storage_errors` and
  :mod:`~generator.repository.bucket_reads`: S3/GCS/folder URLs and filesystems, storage failures as located errors,
  a bucket listed and read within limits;
- :mod:`~generator.repository.publish`: rolling versions to a bucket, with :mod:`~generator.repository.bucket_state`
  (what the bucket serves, read first), :mod:`~generator.repository.publish_files` (what it uploads) and
  :mod:`~generator.repository.publish_lock` (the publishers' lock);
- :mod:`~generator.repository.contract_sources`: the contracts a folder, bucket or version folder serves (diff and
  publish read them).
"""

from generator.repository.lock import lock_problems

__all__ = ["lock_problems"]
