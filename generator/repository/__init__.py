"""Repository folders and buckets: staging, lock, verify, cache, storage, publish."""
