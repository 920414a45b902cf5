import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Echo every input back as the output of the same position."""

    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])

    def execute(self, requests):
        responses = []
        for request in requests:
            tensors = []
            for inp, out in zip(self.model_config["input"], self.model_config["output"]):
                data = pb_utils.get_input_tensor_by_name(request, inp["name"])
                if data is not None:
                    tensors.append(pb_utils.Tensor(out["name"], np.array(data.as_numpy())))
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
