"""LLM inference with Hugging Face transformers, timed token by token inside the environment.

The model is built from a config with random weights (speed does not depend on weight
values; nothing is downloaded) or loaded from a local checkpoint. Prompts are random token
ids of a fixed length and every request generates exactly output_len tokens
(min_new_tokens = max_new_tokens), so every environment does the same work. A streamer
timestamps each decoding step on the host: the token is on the host when put() is called
(generate copies it there), which gives time to first token and inter-token latency.
"""

import time

T_ENTER = time.time()  # first statement: the launcher's clock minus this is start-up latency

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

from probe_common import (  # noqa: E402
    finish,
    header,
    torch_facts,
    torch_peak_bytes,
    torch_sync,
    write_atomic,
)


class StepClock:
    """A transformers streamer (BaseStreamer protocol: put, end) that records when each
    decoding step's tokens reach the host. The first put() is the prompt itself."""

    def __init__(self) -> None:
        self.prompt_seen = False
        self.steps: list[float] = []

    def put(self, value) -> None:  # noqa: ANN001 - a torch tensor
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.steps.append(time.perf_counter())

    def end(self) -> None:
        pass


def build_model(torch, transformers, args):
    """Random weights from a config (built on the device: on the CPU a 1B model takes
    tens of seconds to initialise), or a local checkpoint."""
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(args.seed)
    if args.model_path:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            args.model_path, dtype=dtype, attn_implementation=args.attn_implementation,
            local_files_only=True).to(args.device)
        source = {"source": "path", "path": args.model_path}
    else:
        spec = json.loads(args.model_config)
        config = transformers.AutoConfig.for_model(**spec)
        with torch.device(args.device):
            model = transformers.AutoModelForCausalLM.from_config(
                config, dtype=dtype, attn_implementation=args.attn_implementation)
        source = {"source": "config", "config": spec}
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())
    return model, {**source, "model_type": model.config.model_type, "parameters": n_params,
                   "dtype": args.dtype, "vocab_size": model.config.vocab_size}


def generation_kwargs(model, args) -> dict:
    """Fixed-length generation; decoding mode plain (dynamic cache, eager), static (static
    KV cache, eager) or compiled (static cache, transformers' automatic torch.compile)."""
    eos = model.config.eos_token_id
    kwargs = {
        "max_new_tokens": args.output_len,
        "min_new_tokens": args.output_len,
        "do_sample": False,
        "pad_token_id": 0,
        "eos_token_id": eos if eos is not None else 0,
        "disable_compile": args.decoding != "compiled",
    }
    if args.decoding in ("static", "compiled"):
        kwargs["cache_implementation"] = "static"
    return kwargs


def run_requests(torch, model, args) -> tuple[list[dict], list[float]]:
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    vocab = model.config.vocab_size
    sync = torch_sync(torch, args.device)
    kwargs = generation_kwargs(model, args)
    rows = []
    window = [0.0, 0.0]
    for i in range(args.warmup + args.requests):
        ids = torch.randint(1, vocab, (args.batch_size, args.input_len), generator=gen)
        ids = ids.to(args.device)
        mask = torch.ones_like(ids)
        clock = StepClock()
        sync()
        if i == args.warmup:
            window[0] = time.time()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, streamer=clock, **kwargs)
        sync()
        t1 = time.perf_counter()
        window[1] = time.time()
        new = out.shape[1] - ids.shape[1]
        if new != args.output_len or len(clock.steps) != args.output_len:
            raise RuntimeError(f"request {i} generated {new} tokens in {len(clock.steps)} "
                               f"steps, expected {args.output_len}")
        rows.append({
            "index": i,
            "warmup": i < args.warmup,
            "batch_size": args.batch_size,
            "input_len": args.input_len,
            "output_len": new,
            "latency_s": t1 - t0,
            "step_s": [s - t0 for s in clock.steps],
        })
    return rows, window


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--model-config", help="JSON: model_type plus config fields")
    p.add_argument("--model-path", help="local checkpoint folder (instead of --model-config)")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--attn-implementation", default="sdpa")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--requests", type=int, default=5)
    p.add_argument("--decoding", default="plain", choices=["plain", "static", "compiled"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="import, reach the device, report")
    args = p.parse_args(argv)
    if not args.check and bool(args.model_config) == bool(args.model_path):
        p.error("give exactly one of --model-config and --model-path")

    t_import0 = time.perf_counter()
    import torch
    import transformers

    import_s = time.perf_counter() - t_import0
    result = header("llm", T_ENTER, import_s, {**torch_facts(torch, args.device),
                                               "transformers": transformers.__version__})
    if args.check:
        torch.zeros(1, device=args.device)  # the check must reach the device
        write_atomic(args.out, result)
        return 0
    t_build0 = time.perf_counter()
    model, facts = build_model(torch, transformers, args)
    torch_sync(torch, args.device)()
    result["build_s"] = time.perf_counter() - t_build0
    result["model"] = facts
    rows, window = run_requests(torch, model, args)
    result.update({
        "decoding": args.decoding,
        "requests": rows,
        "measure_window_unix": window,
        **torch_peak_bytes(torch, args.device),
    })
    return finish(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
