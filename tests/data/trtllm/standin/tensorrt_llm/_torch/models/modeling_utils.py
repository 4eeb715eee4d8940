"""STAND-IN registry: some architectures TensorRT-LLM's PyTorch backend registers with
@register_auto_model (tensorrt_llm/_torch/models/modeling_*.py); GemmaForCausalLM (Gemma 1)
is not among them."""

MODEL_CLASS_MAPPING = {name: object for name in (
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Phi3ForCausalLM",
    "Qwen2ForCausalLM", "Gemma3ForCausalLM")}
