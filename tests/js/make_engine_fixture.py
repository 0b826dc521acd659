"""Write tests/js/fixtures/engine.onnx and engine.json: a frame graph small enough to check
views/live/engine.js by hand (tests/js/engine.test.mjs), in the shape the library's exported graphs
have: the hidden states, the hyperparameters and the noise arrays in, the arrays a frame draws out.

    out[s, t]  = sum_h states[0, t, h] + beta * sum_j noise_0[s, j, t]      # (S, T)
    gate[s, k] = -log(noise_1[s, k]) * beta                                  # (S, 3)

Run `.venv/bin/python tests/js/make_engine_fixture.py` (it needs the onnx package).
"""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HIDDEN = 4
MANIFEST = {
    "hidden": HIDDEN,
    "hyper": ["beta"],
    "noise": [{"name": "noise_0", "dims": ["S", 2, "T"]}, {"name": "noise_1", "dims": ["S", 3]}],
}
OPSET = 17           # onnxruntime-web's wasm build runs opsets up to 21; 17 keeps ReduceSum's axes an input


def graph():
    """The ModelProto of the formulas above."""
    from onnx import TensorProto, helper

    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("states", f32, [1, "T", HIDDEN]),
              helper.make_tensor_value_info("hyper", f32, [len(MANIFEST["hyper"])])]
    inputs += [helper.make_tensor_value_info(n["name"], f32, n["dims"]) for n in MANIFEST["noise"]]
    outputs = [helper.make_tensor_value_info("out", f32, ["S", "T"]),
               helper.make_tensor_value_info("gate", f32, ["S", 3])]
    axes = [helper.make_tensor(name, TensorProto.INT64, [1], [axis]) for name, axis in (("axis1", 1), ("axis2", 2))]
    nodes = [
        helper.make_node("ReduceSum", ["states", "axis2"], ["row"], keepdims=0),          # (1, T)
        helper.make_node("ReduceSum", ["noise_0", "axis1"], ["noise_sum"], keepdims=0),   # (S, T)
        helper.make_node("Mul", ["noise_sum", "hyper"], ["scaled"]),
        helper.make_node("Add", ["row", "scaled"], ["out"]),
        helper.make_node("Log", ["noise_1"], ["log_u"]),
        helper.make_node("Neg", ["log_u"], ["neg_log_u"]),
        helper.make_node("Mul", ["neg_log_u", "hyper"], ["gate"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "engine_fixture", inputs, outputs, initializer=axes),
                              opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bam-viz tests")
    model.ir_version = 8
    return model


if __name__ == "__main__":
    import onnx

    model = graph()
    onnx.checker.check_model(model, full_check=True)
    (FIXTURES / "engine.onnx").write_bytes(model.SerializeToString())
    (FIXTURES / "engine.json").write_text(json.dumps(MANIFEST, indent=1) + "\n", encoding="utf-8")
    print("wrote tests/js/fixtures/engine.onnx and engine.json")
