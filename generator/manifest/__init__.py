"""The repository manifest (gen-repo.yaml): loading, overrides, number ranges, the starter manifest."""
