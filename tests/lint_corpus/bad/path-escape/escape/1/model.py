import triton_python_backend_utils as pb_utils  # noqa: F401
