"""Shared pieces of decode_bench.py and check_transformers.py.

Pure-Python parts (shapes, percentiles, weight-byte counting rules, argument helpers, JSON
writing, mpk-run invocation) import without torch so that they can be tested anywhere; the
torch/transformers parts import lazily inside the functions that need them.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MPK_RUN = os.path.join(REPO_ROOT, "build", "bin", "mpk-run")

# Qwen3 shapes (the published configs' numbers). "tiny" exists only to exercise the scripts on a
# machine without a GPU (with --device cpu --mpk-backend reference).
SHAPES = {
    "qwen3-0.6b": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, intermediate_size=3072,
                       vocab_size=151936, tie_word_embeddings=True, rope_theta=1000000.0,
                       rms_norm_eps=1e-6, max_position_embeddings=40960),
    "qwen3-8b": dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, intermediate_size=12288,
                     vocab_size=151936, tie_word_embeddings=False, rope_theta=1000000.0,
                     rms_norm_eps=1e-6, max_position_embeddings=40960),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, intermediate_size=160,
                 vocab_size=1031, tie_word_embeddings=True, rope_theta=1000000.0,
                 rms_norm_eps=1e-6, max_position_embeddings=4096),
}

# Random init: N(0, WEIGHT_STD) for every matrix (transformers' own initializer_range), RMSNorm
# scales 1 + N(0, NORM_STD) so that a backend ignoring a norm scale is caught. Never zeros.
WEIGHT_STD = 0.02
NORM_STD = 0.1
BOS, EOS = 151643, 151645  # Qwen3's ids (clamped into the vocabulary for small shapes)


def log(msg=""):
    print(msg, flush=True)


# ----------------------------------------------------------------------------- pure helpers

def percentile(values, p):
    """Nearest-rank percentile (the rule mpk-run uses): the smallest value with at least p% of
    the values at or below it."""
    if not values:
        return float("nan")
    v = sorted(values)
    rank = int(math.ceil(p / 100.0 * len(v)))
    return float(v[min(len(v) - 1, max(rank, 1) - 1)])


def summarize(values):
    if not values:
        return None
    return {"p50": percentile(values, 50), "p95": percentile(values, 95),
            "p99": percentile(values, 99), "mean": sum(values) / len(values),
            "min": min(values), "max": max(values), "n": len(values)}


def first_divergence(a, b, n=None):
    """Index of the first position where the two token lists differ within the first n (None:
    the shorter length); None when they agree there."""
    m = min(len(a), len(b)) if n is None else min(n, len(a), len(b))
    for i in range(m):
        if a[i] != b[i]:
            return i
    return None


def token_agreement(a, b, n):
    """Summary of how two greedy token streams agree over their first n tokens."""
    m = min(n, len(a), len(b))
    div = first_divergence(a, b, m)
    return {"compared": m, "identical": div is None,
            "first_divergence_step": div,
            "matching_before_divergence": m if div is None else div}


def prompt_ids(n, vocab, seed=39):
    """A fixed pseudo-random prompt of n ids in [0, vocab), independent of torch."""
    state = seed * 2654435761 % (1 << 32) or 1
    ids = []
    for _ in range(n):  # xorshift32
        state ^= (state << 13) & 0xFFFFFFFF
        state ^= state >> 17
        state ^= (state << 5) & 0xFFFFFFFF
        ids.append(state % vocab)
    return ids


def weight_bytes_rule(params, tied, embed_name="model.embed_tokens.weight", hidden=None, elt=2):
    """Bytes of weights read per decode token, from {name: bytes} of the model's unique
    parameters: every matrix and norm once; the embedding table counted once if it is also the
    LM head (tied), otherwise only the one row that the lookup reads."""
    total = 0
    for name, nbytes in params.items():
        if name == embed_name:
            total += nbytes if tied else (hidden or 0) * elt
        else:
            total += nbytes
    return total


class Deadline:
    """Skips phases that would not finish before an absolute wall-clock deadline."""

    def __init__(self, epoch=None):
        self.epoch = epoch

    def left(self):
        return float("inf") if self.epoch is None else self.epoch - time.time()

    def allows(self, needed_s):
        return self.left() >= needed_s


def write_json(path, obj, indent=1):
    if not path:
        return
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=indent, default=str)
        f.write("\n")
    os.replace(tmp, path)


def add_common_args(ap):
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-0.6b")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--mpk-run", default=DEFAULT_MPK_RUN, help="the mpk-run binary")
    ap.add_argument("--mpk-backend", default="gpu", choices=["gpu", "auto", "reference"],
                    help="mpk-run --backend (reference: only to test this script without a GPU)")
    ap.add_argument("--device", default="cuda", help="torch device (cpu: testing only)")
    ap.add_argument("--seed", type=int, default=1234, help="weight seed")
    ap.add_argument("--prompt-len", type=int, default=39)
    ap.add_argument("--model-dir", help="save the model here (default: a temporary folder, removed)")
    ap.add_argument("--deadline", type=float,
                    help="absolute time (seconds since the epoch) after which no phase starts")
    return ap


def mpk_env(mpk_run):
    """The environment for mpk-run: the bundled libraries of a carried build folder
    (BUILD/devlibs, see shared/device/bundle.sh) go on LD_LIBRARY_PATH of the child only, so that
    they never shadow the libraries of this Python process."""
    env = dict(os.environ)
    devlibs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(mpk_run))), "devlibs")
    if os.path.isdir(devlibs):
        env["LD_LIBRARY_PATH"] = devlibs + (":" + env["LD_LIBRARY_PATH"]
                                            if env.get("LD_LIBRARY_PATH") else "")
    return env


def mpk_command(mpk_run, model_dir, prompt, steps, backend, kv_capacity=None, logits_out=None,
                steps_per_launch=None, profile_out=None):
    """The mpk-run command line: greedy, EOS ignored, JSON out. steps_per_launch N > 1 is
    multi-step mode (one launch decodes up to N tokens); 1 is mpk-run's default and is left out,
    so that an mpk-run without --steps-per-launch still runs the single-step setting."""
    cmd = [mpk_run, "--model", model_dir, "--prompt-ids", ",".join(str(t) for t in prompt),
           "--max-new-tokens", str(steps), "--backend", backend, "--json", "--ignore-eos"]
    if kv_capacity:
        cmd += ["--kv-capacity", str(kv_capacity)]
    if steps_per_launch and steps_per_launch != 1:
        cmd += ["--steps-per-launch", str(steps_per_launch)]
    if logits_out:
        cmd += ["--logits-out", logits_out]
    if profile_out:
        cmd += ["--profile-out", profile_out]
    return cmd


def mpk_timings(res):
    """The timing parts of mpk-run's JSON, with the keys an older mpk-run lacks as None
    (steps_per_launch: 1). latency_ms is the per-token figure (single-step: host time per
    one-token decode; multi-step: device time per step); device_step_ms is per decode step on
    the device clock; launch_ms is host time per mpk_session_decode call; tuning says whether
    the load ran a tuning result's parameters (what was timed)."""
    return {"steps_per_launch": res.get("steps_per_launch", 1), "timer": res.get("timer"),
            "latency_ms": res.get("latency_ms"), "device_step_ms": res.get("device_step_ms"),
            "launch_ms": res.get("launch_ms"), "prefill_ms": res.get("prefill_ms"),
            "tuning": res.get("tuning")}


def mpk_run_mismatch(res, steps, steps_per_launch):
    """How one mpk-run decode result differs from the run asked for: a list of messages."""
    out = []
    spl = mpk_timings(res)["steps_per_launch"]
    if spl != steps_per_launch:
        out.append(f"mpk-run reports {spl} steps per launch, not {steps_per_launch}")
    n = len(res.get("tokens", []))
    if n != steps:
        out.append(f"mpk-run produced {n} tokens, not {steps}")
    return out


def read_json_file(path):
    """(object, None) from a JSON file, or (None, why not)."""
    try:
        with open(path) as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, f"{path} was not written"
    except (OSError, ValueError) as e:
        return None, f"{path}: {type(e).__name__}: {e}"


def run_mpk(cmd, timeout_s, env=None):
    """Runs mpk-run; returns (result dict or None, record dict with the command line, exit code,
    wall time and stderr tail)."""
    rec = {"command": " ".join(cmd[:1] + [a if len(a) < 200 else a[:60] + "..." for a in cmd[1:]])}
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, timeout_s), env=env)
    except subprocess.TimeoutExpired as e:
        rec.update(error=f"mpk-run timed out after {timeout_s:.0f} s",
                   stderr_tail=(e.stderr or "")[-2000:] if isinstance(e.stderr, str) else "")
        return None, rec
    except OSError as e:
        rec.update(error=f"mpk-run could not start: {e}")
        return None, rec
    rec["wall_s"] = round(time.time() - t0, 3)
    rec["exit_code"] = p.returncode
    rec["stderr_tail"] = p.stderr[-2000:]
    if p.returncode != 0:
        rec["error"] = f"mpk-run exited {p.returncode}: {p.stderr.strip()[-1500:]}"
        return None, rec
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        rec["error"] = f"mpk-run printed no JSON ({e}): {p.stdout[-500:]}"
        return None, rec
    return res, rec


def model_tempdir(nbytes):
    """A folder for the saved model: /dev/shm when it has room (fast), else the temp dir."""
    for base in ("/dev/shm", tempfile.gettempdir()):
        try:
            if os.path.isdir(base) and shutil.disk_usage(base).free > nbytes * 1.2 + (2 << 30):
                return tempfile.mkdtemp(prefix="mpk-bench-", dir=base)
        except OSError:
            pass
    return tempfile.mkdtemp(prefix="mpk-bench-")


def nvidia_smi():
    """GPU conditions from nvidia-smi (name, driver, clocks, power, temperature); {} if absent."""
    fields = ["name", "driver_version", "memory.total", "clocks.sm", "clocks.mem",
              "clocks.max.sm", "clocks.max.mem", "clocks.applications.graphics", "power.draw",
              "power.limit", "temperature.gpu", "pstate", "persistence_mode", "compute_mode"]
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields),
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    if p.returncode != 0:
        return {"error": p.stderr.strip() or p.stdout.strip()}
    vals = [v.strip() for v in p.stdout.strip().splitlines()[0].split(",")]
    return dict(zip(fields, vals))


# ----------------------------------------------------------------------------- torch parts

def quiet_transformers():
    import transformers
    transformers.logging.set_verbosity_error()
    try:
        transformers.utils.logging.disable_progress_bar()
    except Exception:  # noqa: BLE001
        pass


def versions():
    import torch
    import transformers
    v = {"python": sys.version.split()[0], "torch": torch.__version__,
         "transformers": transformers.__version__, "cuda_runtime": torch.version.cuda}
    try:
        import triton
        v["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    return v


def device_props(device):
    import torch
    if not str(device).startswith("cuda"):
        return {"device": str(device)}
    p = torch.cuda.get_device_properties(torch.device(device))
    return {"device": p.name, "sm_count": p.multi_processor_count,
            "memory_gib": round(p.total_memory / 2**30, 1),
            "l2_mib": round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
            "capability": f"{p.major}.{p.minor}"}


def make_config(shape, attn_implementation=None, hidden_act="silu"):
    from transformers import Qwen3Config
    s = dict(SHAPES[shape])
    theta = s.pop("rope_theta")
    vocab = s["vocab_size"]
    kw = dict(s, rope_parameters={"rope_type": "default", "rope_theta": theta},
              attention_bias=False, bos_token_id=min(BOS, vocab - 1), eos_token_id=min(EOS, vocab - 2),
              use_cache=True, hidden_act=hidden_act)
    if attn_implementation:
        kw["attn_implementation"] = attn_implementation
    return Qwen3Config(**kw)


def build_model(shape, device, seed, attn_implementation=None, hidden_act="silu"):
    """A random-weight Qwen3 of the named shape, built in bf16 directly on the device (its MLP
    activation `hidden_act`: gelu_pytorch_tanh runs on mpk's host fallback)."""
    import torch
    from transformers import Qwen3ForCausalLM
    cfg = make_config(shape, attn_implementation, hidden_act)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device), torch.no_grad():
            model = Qwen3ForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    if any(p.dtype != torch.bfloat16 for p in model.parameters()):
        model = model.to(torch.bfloat16)
    if attn_implementation:
        set_attn_implementation(model, attn_implementation)
    init_weights(model, seed, device)
    model.eval()
    if cfg.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model, cfg


def set_attn_implementation(model, name):
    """Switches a transformers model's attention ("eager", "sdpa"); older versions read it from
    the config."""
    try:
        model.set_attn_implementation(name)
    except Exception:  # noqa: BLE001 - older transformers
        model.config._attn_implementation = name


def init_weights(model, seed, device):
    import torch
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight"):
                r = torch.randn(p.shape, generator=g, device=p.device, dtype=torch.float32)
                p.copy_(r.mul_(NORM_STD).add_(1.0))
            else:
                p.normal_(0.0, WEIGHT_STD, generator=g)


def weight_bytes(model, cfg):
    """Weight bytes read per decode token (see weight_bytes_rule)."""
    # named_parameters() yields a shared (tied) parameter once, under its first name
    # (model.embed_tokens.weight; lm_head.weight is then left out).
    params = {name: p.numel() * p.element_size() for name, p in model.named_parameters()}
    elt = next(model.parameters()).element_size()
    return weight_bytes_rule(params, bool(cfg.tie_word_embeddings), hidden=cfg.hidden_size,
                             elt=elt), sum(params.values())


def save_model(model, path):
    model.save_pretrained(path)
    return sorted(os.listdir(path))


def free_gpu():
    import gc
    import torch
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def gpu_memory(device):
    """GPU memory now, in GB: free and total on the device (all processes), and this process's
    allocated and peak allocated bytes; {} on a CPU device."""
    import torch
    if not str(device).startswith("cuda"):
        return {}
    dev = torch.device(device)
    free, total = torch.cuda.mem_get_info(dev)
    return {"free_gb": round(free / 1e9, 2), "total_gb": round(total / 1e9, 2),
            "allocated_gb": round(torch.cuda.memory_allocated(dev) / 1e9, 2),
            "peak_allocated_gb": round(torch.cuda.max_memory_allocated(dev) / 1e9, 2)}


class StepTimer:
    """Per-step timings: CUDA events on the current stream (read after one synchronize at the
    end), or the host clock on a CPU device."""

    def __init__(self, n, device):
        import torch
        self.cuda = str(device).startswith("cuda")
        self.n = n
        if self.cuda:
            self.starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            self.ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        else:
            self.t = [[0.0, 0.0] for _ in range(n)]

    def start(self, i):
        if self.cuda:
            self.starts[i].record()
        else:
            self.t[i][0] = time.perf_counter()

    def stop(self, i):
        if self.cuda:
            self.ends[i].record()
        else:
            self.t[i][1] = time.perf_counter()

    def ms(self):
        import torch
        if self.cuda:
            torch.cuda.synchronize()
            return [s.elapsed_time(e) for s, e in zip(self.starts, self.ends)]
        return [(b - a) * 1e3 for a, b in self.t]
