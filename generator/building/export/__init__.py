"""Export stages: torch -> ONNX, ONNX -> TensorRT plan."""
