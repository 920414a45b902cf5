"""The build: the pipeline, one model's artifacts, reference data, samples, Ray, export."""
