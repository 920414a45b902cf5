# Lint checks only that the model file the backend expects is present; it is never served.
