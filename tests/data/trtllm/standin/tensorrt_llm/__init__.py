"""STAND-IN for the tensorrt_llm package in tests of the trtllm probe (nothing but the model
registry the probe's preflight reads); its version comes from the dist-info the test adds."""
