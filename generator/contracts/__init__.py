"""What a client reads back from a repository: contract diffs, request and sample array files."""
