"""Export stages: torch -> ONNX (checked by onnxruntime) -> TensorRT, and what a graph tells about its inputs."""
