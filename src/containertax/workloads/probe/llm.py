"""LLM inference with Hugging Face transformers, timed token by token inside the environment.

The model is built from a config with random weights (speed does not depend on weight
values; nothing is downloaded) or loaded from a local checkpoint. Prompts are random token
ids of a fixed length and every request generates exactly output_len tokens
(min_new_tokens = max_new_tokens), so every environment does the same work. A streamer
timestamps each decoding step on the host: the token is on the host when put() is called
(generate copies it there), which gives time to first token and inter-token latency.

Decoding `engine` is what an inference engine does instead of `generate`: the prompt is
prefilled into a static KV cache, then every decoding step is one call of a function
compiled once with torch.compile (mode reduce-overhead: on a GPU, CUDA graphs replay the
whole step without launching its kernels one by one); the host never waits between steps,
and CUDA events time them. Compiled code is kept in TORCHINDUCTOR_CACHE_DIR when the host
sets it, so only the campaign's first run pays for compilation, in its warm-up requests.
"""

import time

# first statement: the launcher's clock minus T_ENTER is start-up latency; T_ENTER_MONO
# opens the run's timeline (probe_common.mark)
T_ENTER, T_ENTER_MONO = time.time(), time.monotonic()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

# as the host set it: torch fills in its own default once it compiles something
COMPILE_CACHE = os.environ.get("TORCHINDUCTOR_CACHE_DIR")

from probe_common import (  # noqa: E402
    MARKS,
    finish,
    header,
    mark,
    torch_facts,
    torch_peak_bytes,
    torch_sync,
    write_atomic,
)

mark("enter", T_ENTER_MONO)

# compile_breakdown() of the first compiled step, taken when it returned (engine decoding)
COMPILE_BREAKDOWN: dict = {}


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


def register_sdpa_gqa(torch, transformers) -> None:
    """Attention `sdpa_gqa`: transformers' SDPA attention without copying K and V per query
    head. With grouped-query attention (Llama-3-8B: 32 query heads share 8 K/V heads) and a
    mask (a static cache always has one), transformers repeats the cached K and V for every
    query head before SDPA: four copies of the whole cache written and read again in every
    layer of every step. An inference engine's attention reads each K/V head once; so does
    this: each K/V head's query heads are folded into its query rows (the mask repeated to
    match), which is the same attention, and SDPA runs on the cache as it is."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def sdpa_gqa(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                 is_causal=None, **kwargs):
        groups = getattr(module, "num_key_value_groups", 1)
        if groups == 1 or attention_mask is None:  # nothing to fold, or a causal flag only
            return sdpa_attention_forward(module, query, key, value, attention_mask,
                                          dropout=dropout, scaling=scaling,
                                          is_causal=is_causal, **kwargs)
        batch, heads, rows, dim = query.shape
        kv_heads, length = key.shape[1], key.shape[-2]
        mask = attention_mask[:, :, :, :length]
        mask = mask[:, :, None].expand(-1, -1, groups, -1, -1)
        mask = mask.reshape(mask.shape[0], mask.shape[1], groups * rows, length)
        out = torch.nn.functional.scaled_dot_product_attention(
            query.reshape(batch, kv_heads, groups * rows, dim), key, value, attn_mask=mask,
            dropout_p=dropout if module.training else 0.0, scale=scaling)
        return out.reshape(batch, heads, rows, dim).transpose(1, 2).contiguous(), None

    from transformers import masking_utils

    transformers.AttentionInterface.register("sdpa_gqa", sdpa_gqa)
    # masks are built by name too, and an unknown name gets none: the prefill stays causal
    # (SDPA's causal flag) but a decoding step would attend to the static cache's unwritten
    # slots. The same boolean mask as sdpa's
    masking_utils.AttentionMaskInterface.register(
        "sdpa_gqa", masking_utils.ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def build_model(torch, transformers, args):
    """Random weights from a config (built on the device: on the CPU a 1B model takes
    tens of seconds to initialise), or a local checkpoint."""
    dtype = getattr(torch, args.dtype)
    if args.attn_implementation == "sdpa_gqa":
        register_sdpa_gqa(torch, transformers)
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
                   "dtype": args.dtype, "vocab_size": model.config.vocab_size,
                   "attention": args.attn_implementation}


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


def weight_bytes(model) -> dict:
    """Bytes of the weights, and of those a decoding step reads whole: the input embedding
    table is only gathered (a few rows per token) unless the output layer shares it."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    emb = model.get_input_embeddings().weight
    out = model.get_output_embeddings()
    tied = out is not None and out.weight.data_ptr() == emb.data_ptr()
    per_step = total if tied else total - emb.numel() * emb.element_size()
    return {"weight_bytes": total, "weight_bytes_per_step": per_step, "tied_embeddings": tied}


def static_cache(transformers, model, args, max_len: int):
    """A static KV cache for the batch (its signature changed across transformers
    releases: 5.x sizes itself on first use, 4.x takes batch, device and dtype)."""
    cls = transformers.StaticCache
    try:
        return cls(config=model.config, max_cache_len=max_len)
    except TypeError:
        import torch

        return cls(config=model.config, max_batch_size=args.batch_size, max_cache_len=max_len,
                   device=args.device, dtype=getattr(torch, args.dtype))


class EventClock:
    """Step times without synchronising: a CUDA event per step, read after the request
    (on the CPU, where there are no events, the host clock after each step)."""

    def __init__(self, torch, device: str) -> None:
        self.torch = torch
        self.cuda = device.startswith("cuda")
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            event = self.torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def offsets_s(self) -> list[float]:
        """Seconds from the first mark to each later one (call after synchronising)."""
        first = self.marks[0]
        if self.cuda:
            return [first.elapsed_time(e) / 1000.0 for e in self.marks[1:]]
        return [m - first for m in self.marks[1:]]


def engine_requests(torch, transformers, model, args) -> tuple[list[dict], list[float]]:
    """Static cache + one compiled decoding step (CUDA graphs on a GPU), greedy, exactly
    output_len tokens per sequence; the warm-up requests compile and capture."""
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    vocab = model.config.vocab_size
    sync = torch_sync(torch, args.device)
    cache = static_cache(transformers, model, args, args.input_len + args.output_len)

    # only the last position's logits, as an engine computes them (the prefill would
    # otherwise write batch x prompt x vocabulary logits); older releases lack the argument
    last_only = ({"logits_to_keep": 1}
                 if "logits_to_keep" in inspect.signature(model.forward).parameters else {})

    def forward(ids, position):
        logits = model(input_ids=ids, cache_position=position, past_key_values=cache,
                       use_cache=True, return_dict=False, **last_only)[0]
        return logits[:, -1].argmax(-1, keepdim=True)

    if args.coordinate_descent:  # inductor tunes the launch configs of the kernels it writes
        import torch._inductor.config as inductor

        inductor.coordinate_descent_tuning = True
    step = torch.compile(forward, mode=args.compile_mode, fullgraph=True)
    prompt_positions = torch.arange(args.input_len, device=args.device)
    decode_positions = [torch.tensor([args.input_len + i], device=args.device)
                        for i in range(args.output_len - 1)]
    rows = []
    window = [0.0, 0.0]
    for i in range(args.warmup + args.requests):
        ids = torch.randint(1, vocab, (args.batch_size, args.input_len), generator=gen)
        ids = ids.to(args.device)
        clock = EventClock(torch, args.device)
        # no_grad, not inference_mode: the cache's tensors are updated in place across
        # requests, which inference tensors do not allow outside inference mode
        with torch.no_grad():
            cache.reset()
            sync()
            if i == args.warmup:
                window[0] = time.time()
                mark("warm")
            t0 = time.perf_counter()
            clock.mark()
            token = forward(ids, prompt_positions)  # prefill, eager: compute-bound
            clock.mark()
            tokens = [token]
            for position in decode_positions:
                torch.compiler.cudagraph_mark_step_begin()
                token = step(token, position).clone()  # graph outputs are reused buffers
                clock.mark()
                tokens.append(token)
                if i == 0 < args.warmup and "compiled" not in MARKS:
                    # the first compiled step returned (traced, compiled or loaded from
                    # the cache): the end of the timeline's compile phase, host side
                    mark("compiled")
                    COMPILE_BREAKDOWN.update(compile_breakdown(torch))
            sync()
        t1 = time.perf_counter()
        window[1] = time.time()
        rows.append(request_row(args, i, len(tokens), t1 - t0, clock.offsets_s(),
                                int(torch.cat(tokens, dim=1).sum())))
    return rows, window


def request_row(args, index: int, new: int, latency_s: float, step_s: list[float],
                token_sum: int) -> dict:
    """One request's row, the same for both decoding modes; a request that did not emit
    exactly output_len tokens, one per timed step, is an error, not a row."""
    if new != args.output_len or len(step_s) != args.output_len:
        raise RuntimeError(f"request {index} generated {new} tokens in {len(step_s)} steps, "
                           f"expected {args.output_len}")
    return {"index": index, "warmup": index < args.warmup, "batch_size": args.batch_size,
            "input_len": args.input_len, "output_len": new, "latency_s": latency_s,
            "step_s": step_s, "token_sum": token_sum}


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
            mark("warm")
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, streamer=clock, **kwargs)
        sync()
        t1 = time.perf_counter()
        window[1] = time.time()
        rows.append(request_row(args, i, out.shape[1] - ids.shape[1], t1 - t0,
                                [s - t0 for s in clock.steps],
                                int(out[:, ids.shape[1]:].sum())))
    return rows, window


def compile_counters(torch) -> dict:
    """torch.compile's own counts of cache hits and misses in this process (FX graph cache,
    AOTAutograd cache, ...): whether the compile phase loaded or compiled."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {group: {k: int(v) for k, v in counts.items() if "cache" in k or "hit" in k
                    or "miss" in k or "bypass" in k}
            for group, counts in counters.items() if group in ("inductor", "aot_autograd")}


def compile_breakdown(torch) -> dict:
    """Where the first compiled step's time went (issue #32), taken right after it returned:
    torch.compile's own cumulative seconds and calls per timed function (Dynamo's
    compilation_time_metrics, as torch._dynamo.utils.compile_times() prints them: e.g.
    _compile.compile_inner, compile_fx_inner, async_compile.wait, PyCodeCache.load_by_key_path),
    its cumulative seconds per compile phase, Inductor's compile_threads, and the processes
    this probe had started by then (its compile worker pool). Anything a torch release
    lacks is null, never an error."""
    try:
        tree = descendants()
    except Exception:  # noqa: BLE001 - a /proc this code did not foresee: unknown
        tree = None
    return {"seconds": _dynamo_seconds(), "phases": _dynamo_phases(),
            "compile_threads": _inductor_threads(), "descendants": tree}


def _dynamo_seconds() -> dict | None:
    import importlib

    try:
        utils = importlib.import_module("torch._dynamo.utils")
    except Exception:  # noqa: BLE001 - any release, any failure: unknown, not an error
        return None
    table = getattr(utils, "compilation_time_metrics", None)
    try:
        if isinstance(table, dict):
            return {str(k): {"s": float(sum(v)), "calls": len(v)} for k, v in table.items()}
        headers, values = utils.compile_times(repr="csv", aggregate=True)
        return {str(k): {"s": float(v), "calls": None}
                for k, v in zip(headers, values, strict=True)}
    except Exception:  # noqa: BLE001
        return None


def autotune_census(limit: int = 24) -> dict | None:
    """Which of this process's Triton kernels took its launch configuration from Inductor's
    autotuning cache and which benchmarked its configurations (issue #32: every Docker run
    benchmarked, no native one). Per kernel: its source file, the .best_config it looks for
    beside that file (as the running release names it: best_config_path),
    whether that file exists here, the configs_hash stored in it against the hash of
    the kernel's own configurations, and what the kernel noted of its lookup
    (autotune_cache_info). Taken after the measured window, so no measured phase pays for
    it; None where Inductor never loaded a Triton kernel (a CPU run, plain decoding)."""
    heuristics = sys.modules.get("torch._inductor.runtime.triton_heuristics")
    tuner = getattr(heuristics, "CachingAutotuner", None)
    if tuner is None:
        return None
    import gc
    import importlib

    try:
        autotune_cache = importlib.import_module("torch._inductor.runtime.autotune_cache")
    except Exception:  # noqa: BLE001 - a release without it: the files are not looked up
        autotune_cache = None
    rows = [_kernel_row(k, autotune_cache, getattr(heuristics, "hash_configs", None))
            for k in gc.get_objects() if _is_a(k, tuner)]
    rows.sort(key=lambda r: (r["state"] or "", r["file"] or ""))
    count: dict[str, int] = {}
    for r in rows:
        for key in ("state", "exists", "hash_matches"):
            if r.get(key) is not None:
                label = f"{key}={r[key]}"
                count[label] = count.get(label, 0) + 1
    cache_dir = None
    with contextlib.suppress(Exception):  # a release without it: unknown
        cache_dir = importlib.import_module(
            "torch._inductor.runtime.cache_dir_utils").cache_dir()
    return {"kernels": len(rows), "counts": count, "cache_dir": cache_dir,
            "multi_config": [r for r in rows if r["configs"] > 1][:limit],
            "sample": rows[:limit]}


def _is_a(obj, cls) -> bool:
    """isinstance without touching the object: gc.get_objects() holds weakref proxies
    whose referent is gone, and isinstance reads their __class__, raising ReferenceError
    (every compiled run crashed so on torch 2.11, issue #40); type() reads no attribute."""
    try:
        return issubclass(type(obj), cls)
    except Exception:  # noqa: BLE001 - an object this code did not foresee: not a kernel
        return False


def best_config_path(autotune_cache, filename: str) -> str | None:
    """The .best_config a kernel's file looks up, as the running release names it: asked of
    its own AutotuneCache.create (local cache only: no remote lookup is set up without
    is_fbcode or autotune_remote_cache), so the name follows the release: torch 2.11
    hashes the sha256 of '<basename>:<cache_key_tag>' again with torch_key() (torch's
    [Note: torch_key in autotune cache key]); earlier releases used the first hash alone.
    Where create() is missing or fails, the name is built both ways and the one that
    exists (else the release's own convention) returned."""
    if autotune_cache is None:
        return None
    cls = getattr(autotune_cache, "AutotuneCache", None)
    try:
        made = cls.create({"autotune_local_cache": True, "autotune_remote_cache": False},
                          filename, "")
        return str(made.local_cache[1])
    except Exception:  # noqa: BLE001 - a release without create(): built below
        pass
    try:
        key = cls._prepare_key(filename)
    except Exception:  # noqa: BLE001
        return None
    folder = os.path.dirname(filename)
    legacy = f"{folder}/{key}.best_config"
    try:
        import hashlib
        import importlib

        torch_key = importlib.import_module("torch._inductor.codecache").torch_key
        current = f"{folder}/{hashlib.sha256(key.encode() + torch_key()).hexdigest()}.best_config"
    except Exception:  # noqa: BLE001 - a release before torch_key: the first hash alone
        return legacy
    return legacy if os.path.exists(legacy) and not os.path.exists(current) else current


def _kernel_row(kernel, autotune_cache, hash_configs) -> dict:
    configs = list(getattr(kernel, "configs", None) or [])
    info = dict(getattr(kernel, "autotune_cache_info", None) or {})
    filename = getattr(kernel, "filename", None)
    row = {"file": filename, "configs": len(configs),
           "launchers": len(getattr(kernel, "launchers", None) or []),
           "state": str(info["autotune_cache_state"]) if "autotune_cache_state" in info
           else None, "info": {str(k): str(v)[:120] for k, v in info.items()},
           "best_config": None, "exists": None, "stored_hash": None, "hash": None,
           "hash_matches": None}
    # a kernel that found its configuration keeps only that one: nothing to compare
    with contextlib.suppress(Exception):
        row["hash"] = hash_configs(configs) if hash_configs and len(configs) > 1 else None
    path = best_config_path(autotune_cache, filename) if filename else None
    if path is not None:
        row.update({"best_config": path, "exists": os.path.exists(path)})
        if row["exists"]:
            try:
                with open(path) as fh:
                    row["stored_hash"] = json.load(fh).get("configs_hash")
            except (OSError, ValueError, AttributeError):
                pass
            if row["stored_hash"] is not None and row["hash"] is not None:
                row["hash_matches"] = row["stored_hash"] == row["hash"]
    return row


def _dynamo_phases() -> dict | None:
    """Dynamo's cumulative seconds per compile phase (cumulative_time_spent_ns, what
    calculate_time_spent() reports: e.g. entire_frame_compile, backend_compile,
    inductor_compile, code_gen)."""
    import importlib

    try:
        table = importlib.import_module("torch._dynamo.utils").cumulative_time_spent_ns
        return {str(k): float(v) / 1e9 for k, v in table.items()}
    except Exception:  # noqa: BLE001
        return None


def _inductor_threads():
    import importlib

    try:
        return int(importlib.import_module("torch._inductor.config").compile_threads)
    except Exception:  # noqa: BLE001
        return None


def descendants(proc: str = "/proc", pid: str = "self") -> dict | None:
    """This process's descendants now (/proc/<pid>/task/*/children): how many, what each
    runs, and when each started, in seconds after this process started (start times in
    clock ticks since boot, /proc/<pid>/stat field 22; 1/CLK_TCK resolution, 10 ms); now_s:
    the same clock's offset of this call (/proc/uptime). None where /proc cannot tell."""
    try:
        hz = os.sysconf("SC_CLK_TCK")
        with open(os.path.join(proc, "uptime")) as fh:
            uptime = float(fh.read().split()[0])
        me = _stat(proc, pid)
        rows, todo = [], [me["pid"]]
        while todo:
            parent = todo.pop()
            for task in os.listdir(os.path.join(proc, str(parent), "task")):
                try:
                    with open(os.path.join(proc, str(parent), "task", task, "children")) as fh:
                        kids = fh.read().split()
                except OSError:
                    continue
                for kid in kids:
                    try:
                        st = _stat(proc, kid)
                    except (OSError, ValueError, IndexError):
                        continue  # gone since
                    rows.append({"pid": st["pid"], "parent": parent, "comm": st["comm"],
                                 "cmd": _cmdline(proc, kid),
                                 "start_s": round((st["start"] - me["start"]) / hz, 3)})
                    todo.append(st["pid"])
    except (OSError, ValueError, IndexError):
        return None
    starts = [r["start_s"] for r in rows]
    return {"count": len(rows), "first_start_s": min(starts, default=None),
            "last_start_s": max(starts, default=None),
            "now_s": round(uptime - me["start"] / hz, 3), "processes": rows[:64]}


def _cmdline(proc: str, pid) -> str | None:
    """The first words of a process's command line (a compile worker names its module)."""
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as fh:
            words = fh.read().split(b"\0")
    except OSError:
        return None
    return " ".join(w.decode(errors="replace") for w in words[:6] if w)[:200]


def _stat(proc: str, pid) -> dict:
    """pid, command name and start time (ticks after boot) from /proc/<pid>/stat; the name
    is between the first '(' and the last ')'."""
    with open(os.path.join(proc, str(pid), "stat")) as fh:
        text = fh.read()
    head, _, tail = text.rpartition(")")
    fields = tail.split()
    return {"pid": int(head.split("(", 1)[0]), "comm": head.split("(", 1)[1],
            "start": int(fields[19])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--model-config", help="JSON: model_type plus config fields")
    p.add_argument("--model-path", help="local checkpoint folder (instead of --model-config)")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--attn-implementation", default="auto",
                   help="auto: sdpa_gqa under engine decoding, sdpa otherwise")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--requests", type=int, default=5)
    p.add_argument("--decoding", default="auto",
                   choices=["auto", "plain", "static", "compiled", "engine"])
    p.add_argument("--compile-mode", default="reduce-overhead",
                   choices=["reduce-overhead", "max-autotune"],
                   help="torch.compile mode of the engine's step (both replay CUDA graphs; "
                        "max-autotune also times Triton matmul kernels against cuBLAS)")
    p.add_argument("--coordinate-descent", action=argparse.BooleanOptionalAction,
                   default=False,
                   help="inductor's coordinate-descent tuning of the kernels it generates")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="import, reach the device, report")
    args = p.parse_args(argv)
    if not args.check and bool(args.model_config) == bool(args.model_path):
        p.error("give exactly one of --model-config and --model-path")
    if args.decoding == "auto":  # as the host resolves it (workloads/transformers.py)
        args.decoding = "engine" if args.device.startswith("cuda") else "plain"
    if args.attn_implementation == "auto":  # likewise (workloads/transformers.py)
        args.attn_implementation = "sdpa_gqa" if args.decoding == "engine" else "sdpa"

    t_import0 = time.perf_counter()
    import torch
    import transformers

    import_s = time.perf_counter() - t_import0
    mark("imports")
    result = header("llm", T_ENTER, import_s, {**torch_facts(torch, args.device),
                                               "transformers": transformers.__version__})
    if args.check:
        torch.zeros(1, device=args.device)  # the check must reach the device
        write_atomic(args.out, result)
        return 0
    if args.device.startswith("cuda"):
        mark("device")  # torch_facts asked the device its name: the CUDA context is up
    t_build0 = time.perf_counter()
    model, facts = build_model(torch, transformers, args)
    torch_sync(torch, args.device)()
    result["build_s"] = time.perf_counter() - t_build0
    mark("model")
    result["model"] = {**facts, **weight_bytes(model)}
    if args.decoding == "engine":
        rows, window = engine_requests(torch, transformers, model, args)
    else:
        rows, window = run_requests(torch, model, args)
    mark("window_end")
    result["autotune_census"] = autotune_census()
    result["compile_counters"] = compile_counters(torch)
    result["compile_breakdown"] = COMPILE_BREAKDOWN or None
    result.update({
        "decoding": args.decoding,
        "compile_cache": COMPILE_CACHE,
        "compile": ({"mode": args.compile_mode, "coordinate_descent": args.coordinate_descent}
                    if args.decoding == "engine" else None),
        # the same greedy tokens whatever the decoding mode: a check that it decodes alike
        "checksum": sum(r["token_sum"] for r in rows),
        "requests": rows,
        "measure_window_unix": window,
        **torch_peak_bytes(torch, args.device),
    })
    return finish(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
