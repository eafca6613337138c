"""Compiled is faster, not slower: issue 31's table, every ratio taken in one run.

Run:  python benchmarks/bench_compiled.py [--number 100] [--repeat 15] [--quick]
                                         [--device {cpu,cuda}] [--mode reduce-overhead]

CPU, one thread, ``torch.compile(fullgraph=True)`` with inductor, float32 unless said
(``--device cuda --mode reduce-overhead``: the same figures on a GPU with CUDA graphs;
each round then ends with a synchronize).
Each figure starts from a reset Dynamo (one cached graph per compiled function, as a
program that compiles it once has).  Rows of one figure are timed interleaved
(``--repeat`` rounds of ``--number`` calls each, after warm-up); a row prints the best
round and the median round per call, in microseconds, and ratios are of medians.  Figures:

1. ``compiled rmsnorm``: ``flashinfer.rmsnorm(x, w, eps)`` compiled (its torch backend is
   chosen on CPU: transparent) against the same math compiled (``F.rms_norm``), at 8x256,
   128x4096 and 1024x4096, static shapes (``dynamic=False``); then at the largest shape
   compiled with ``dynamic=True``, and compiled by default then called at 64, 48 and 64 rows
   first (Dynamo's automatic dynamic marks the rows dynamic after the second size): both
   transparent since the choice does not depend on the sizes (issue 42).
2. ``three chained``: three chained ``rmsnorm`` calls against the torch math, compiled:
   the number of kernels inductor generates for each (``torch._inductor.metrics``).
3. ``tiny llama``: a random ``LlamaForCausalLM`` (hidden 64, 2 layers) whose RMSNorms call
   ``flashinfer.rmsnorm``, against the untouched model, both compiled, one forward; each
   model compiled and timed alone after ``torch._dynamo.reset()``, in alternating rounds
   (the two share their code objects, so compiled side by side each call would also check
   the other's guards: a cost of the benchmark, not of either model).
4. ``opaque floor``: calls that stay an opaque operator (``mm``, tuned; ``rmsnorm`` inside a
   ``use_backends`` block) against a bare ``torch.library`` operator running the same torch
   code in Python: the floor of any opaque Python operator.
5. ``eager``: ``flashinfer.rmsnorm`` (auto) against ``F.rms_norm`` at 4x256, and
   ``flashinfer.mm`` (auto) against ``torch.mm`` at 8x64x64 (added microseconds), with the
   signature floor: a Python function that reads each tensor's shape, strides, dtype and
   device, looks the tuple up in a dict and calls ``torch.mm`` (what a metadata-keyed
   cache of choices costs at least; ``benchmarks/bench_call_overhead.py`` prints it too).
6. ``targets``: issue 31's table, each figure against its target, ``met`` or ``MISSED``.

The last line is JSON with every figure.  The script uses only APIs older than this issue
(it patches the model itself), so the same command measures an older checkout.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import flashinfer
import flashinfer.dispatch.restrictions as restrictions

EPS = 1e-6
Row = Callable[[], Any]
DEVICE = "cpu"  # --device
MODE: str | None = None  # --mode (torch.compile's)
COMPILER = "inductor"  # --compiler (tests use "eager": the script's work without inductor)


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device=DEVICE)


def timed(rows: dict[str, Row], number: int, repeat: int) -> dict[str, dict[str, float]]:
    """Each row's best and median microseconds per call, rounds interleaved; each round
    starts one row later than the last, so that no row always follows the same one (a
    memory-bound row right after another row's writes finds the caches in their state)."""
    for fn in rows.values():
        for _ in range(3):
            fn()
    rounds: dict[str, list[float]] = {k: [] for k in rows}
    order = list(rows.items())
    for r in range(repeat):
        for name, fn in order[r % len(order) :] + order[: r % len(order)]:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            _sync()
            rounds[name].append((time.perf_counter() - start) / number * 1e6)
    return {k: {"best": min(v), "median": statistics.median(v)} for k, v in rounds.items()}


def show(title: str, figures: dict[str, dict[str, float]], base: str) -> dict[str, float]:
    print(f"\n{title}")
    ratios = {}
    for name, f in figures.items():
        ratio = f["median"] / figures[base]["median"]
        ratios[name] = ratio
        print(f"  {name:<44} best {f['best']:9.2f} us  median {f['median']:9.2f} us  {ratio:5.2f}x")
    return ratios


def compiled(fn: Callable[..., Any], dynamic: bool | None = False) -> Callable[..., Any]:
    # dynamic=False: each shape its own static graph (one function compiled at several
    # shapes would otherwise turn dynamic, where a flashinfer call stays opaque).
    return torch.compile(fn, fullgraph=True, backend=COMPILER, dynamic=dynamic, mode=MODE)


def fi_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return flashinfer.rmsnorm(x, w, EPS)


def torch_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), w, EPS)


def compiled_call(shapes: list[str], number: int, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for shape in shapes:
        rows, hidden = (int(s) for s in shape.split("x"))
        x, w = randn(rows, hidden), randn(hidden)
        torch._dynamo.reset()  # one graph per function (see fresh_dynamo)
        cf, ct = compiled(fi_norm), compiled(torch_norm)
        figures = timed(
            {
                "flashinfer.rmsnorm compiled": lambda cf=cf, x=x, w=w: cf(x, w),
                "torch math compiled": lambda ct=ct, x=x, w=w: ct(x, w),
                "flashinfer.rmsnorm eager": lambda x=x, w=w: fi_norm(x, w),
            },
            number,
            repeat,
        )
        ratios = show(f"1. compiled rmsnorm {shape}", figures, "torch math compiled")
        out[shape] = {"figures": figures, "ratio": ratios["flashinfer.rmsnorm compiled"]}
    # Dynamic sizes: dynamic=True, and automatic dynamic (a second size marks the rows
    # dynamic; the figure is then taken at the largest shape, through that graph).
    rows, hidden = (int(s) for s in shapes[-1].split("x"))
    x, w = randn(rows, hidden), randn(hidden)
    for key, title, dynamic in (
        ("dynamic", "dynamic=True", True),
        ("automatic_dynamic", "after 64, 48, 64 rows", None),
    ):
        torch._dynamo.reset()
        cf, ct = compiled(fi_norm, dynamic=dynamic), compiled(torch_norm, dynamic=dynamic)
        if dynamic is None:
            for n in (64, 48, 64):
                cf(randn(n, hidden), w), ct(randn(n, hidden), w)
        figures = timed(
            {
                f"flashinfer.rmsnorm compiled, {title}": lambda cf=cf: cf(x, w),
                f"torch math compiled, {title}": lambda ct=ct: ct(x, w),
            },
            number,
            repeat,
        )
        ratios = show(
            f"1b. compiled rmsnorm {shapes[-1]}, {title}",
            figures,
            f"torch math compiled, {title}",
        )
        out[key] = {"figures": figures, "ratio": ratios[f"flashinfer.rmsnorm compiled, {title}"]}
    return out


def kernels_generated(fn: Callable[..., Any], *args: Any) -> int:
    from torch._inductor import metrics

    torch._dynamo.reset()
    metrics.reset()
    compiled(fn)(*args)
    return int(metrics.generated_kernel_count)


def chained() -> dict[str, int]:
    x, w = randn(8, 256), randn(256)

    def fi(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return fi_norm(fi_norm(fi_norm(x, w), w), w)

    def fi_torch(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        r = flashinfer.rmsnorm
        return r(r(r(x, w, EPS, backend="torch"), w, EPS, backend="torch"), w, EPS, backend="torch")

    def math(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch_norm(torch_norm(torch_norm(x, w), w), w)

    counts = {
        "flashinfer auto": kernels_generated(fi, x, w),
        "flashinfer backend='torch'": kernels_generated(fi_torch, x, w),
        "torch math": kernels_generated(math, x, w),
    }
    print("\n2. three chained rmsnorm calls, compiled: kernels generated")
    for name, n in counts.items():
        print(f"  {name:<44} {n}")
    return counts


class _Norm(nn.Module):
    """A Llama RMSNorm (its weight and epsilon, shared) computed by flashinfer.rmsnorm."""

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.weight, self.eps = norm.weight, norm.variance_epsilon

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return flashinfer.rmsnorm(x, self.weight, self.eps)


def llama(number: int, repeat: int) -> dict[str, Any]:
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    config = LlamaConfig(
        hidden_size=64,
        num_hidden_layers=2,
        vocab_size=128,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval().to(DEVICE)
    patched = copy.deepcopy(model)
    for module in list(patched.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, LlamaRMSNorm):
                setattr(module, name, _Norm(child))
    ids = torch.randint(0, 128, (2, 10), generator=torch.Generator().manual_seed(1)).to(DEVICE)
    # The two models share their code objects (LlamaForCausalLM.forward, ...), so compiled
    # in one process they would share Dynamo's cache entries, and each call would also check
    # the other model's guards (measured: 1.37x for what is 1.03x alone).  A user compiles
    # one model: each is timed alone, after a reset, in alternating rounds.
    rounds: dict[str, list[float]] = {"patched, compiled": [], "unpatched, compiled": []}
    with torch.no_grad():
        for _ in range(3):  # three rounds: the median round is not one disturbed round's
            for name, m in (("patched, compiled", patched), ("unpatched, compiled", model)):
                torch._dynamo.reset()
                cm = compiled(m)
                result = cm(ids, use_cache=False).logits
                torch.testing.assert_close(result, model(ids).logits, atol=1e-4, rtol=0)
                f = timed(
                    {name: lambda cm=cm: cm(ids, use_cache=False)}, max(1, number // 4), repeat
                )
                rounds[name].append(f[name]["median"])
                rounds[name].append(f[name]["best"])
    figures = {
        name: {"best": min(v[1::2]), "median": statistics.median(v[0::2])}
        for name, v in rounds.items()
    }
    ratios = show("3. tiny llama forward", figures, "unpatched, compiled")
    return {"figures": figures, "ratio": ratios["patched, compiled"]}


_floor_lib: Any = None


def _floor_ops() -> tuple[Any, Any, Any, Any]:
    """Bare operators (``torch.library``, a Python kernel, a fake) running torch's code."""
    global _floor_lib
    if _floor_lib is None:
        lib = torch.library.Library("fibench", "FRAGMENT")
        lib.define("rms(Tensor x, Tensor w, float eps) -> Tensor")
        lib.define("mm(Tensor a, Tensor b) -> Tensor")
        lib.impl(
            "rms",
            lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps),
            "CompositeExplicitAutograd",
        )
        lib.impl("mm", lambda a, b: torch.mm(a, b), "CompositeExplicitAutograd")
        # The same bare operators calling flashinfer's API: what any operator pays that
        # makes eager's choice at run time (item 2), with nothing of flashinfer's own
        # operator (its guards, its backend and skip_check arguments, its checks).
        lib.define("rms_decided(Tensor x, Tensor w, float eps) -> Tensor")
        lib.define("mm_decided(Tensor a, Tensor b) -> Tensor")
        lib.impl(
            "rms_decided",
            lambda x, w, eps: flashinfer.rmsnorm(x, w, eps),
            "CompositeExplicitAutograd",
        )
        lib.impl("mm_decided", lambda a, b: flashinfer.mm(a, b), "CompositeExplicitAutograd")
        for name in ("rms", "rms_decided"):
            torch.library.register_fake(
                f"fibench::{name}", lambda x, w, eps: torch.empty_like(x), lib=lib
            )
        for name in ("mm", "mm_decided"):
            torch.library.register_fake(
                f"fibench::{name}", lambda a, b: a.new_empty(a.shape[0], b.shape[1]), lib=lib
            )
        _floor_lib = lib
    ops = torch.ops.fibench
    return ops.rms.default, ops.mm.default, ops.rms_decided.default, ops.mm_decided.default


STATE_FLOOR = "signature floor reading the state 8x64x64"

DECIDED = "bare operator calling flashinfer (decided)"
"""The floor of an opaque call decided at run time: the bare operator, its kernel calling
the API (the eager dispatcher's choice, inside the operator)."""


def opaque(number: int, repeat: int) -> dict[str, Any]:
    rms_floor, mm_floor, rms_decided, mm_decided = _floor_ops()
    x, w = randn(8, 256), randn(256)
    a, b = randn(8, 64), randn(64, 64)
    torch._dynamo.reset()
    c_floor_rms = compiled(lambda x, w: rms_floor(x, w, EPS))
    c_fi_rms = compiled(fi_norm)
    c_floor_mm = compiled(lambda a, b: mm_floor(a, b))
    c_fi_mm = compiled(lambda a, b: flashinfer.mm(a, b))
    c_decided_rms = compiled(lambda x, w: rms_decided(x, w, EPS))
    c_decided_mm = compiled(lambda a, b: mm_decided(a, b))
    with torch.no_grad():
        with flashinfer.use_backends(rmsnorm=["torch"]):  # a block: the call stays opaque
            rms = timed(
                {
                    "flashinfer.rmsnorm, opaque (use_backends)": lambda: c_fi_rms(x, w),
                    "bare operator, same code": lambda: c_floor_rms(x, w),
                    DECIDED: lambda: c_decided_rms(x, w),
                },
                number,
                repeat,
            )
        mm = timed(
            {
                "flashinfer.mm auto, opaque (tuned op)": lambda: c_fi_mm(a, b),
                "bare operator, torch.mm": lambda: c_floor_mm(a, b),
                DECIDED: lambda: c_decided_mm(a, b),
            },
            number,
            repeat,
        )
    # The block named rmsnorm: its "auto" calls stay opaque in this process until the flag
    # is cleared (docs/compile.rst); the figures after this one are of a program without it.
    reset = getattr(restrictions, "reset_block_flags", None)  # None on a checkout before it
    if reset is not None:
        reset()
    r1 = show("4. opaque rmsnorm 8x256 (no_grad)", rms, "bare operator, same code")
    r2 = show("4. opaque mm 8x64x64 (no_grad)", mm, "bare operator, torch.mm")
    return {
        "rmsnorm": {
            "figures": rms,
            "ratio": r1["flashinfer.rmsnorm, opaque (use_backends)"],
            "decided_ratio": r1[DECIDED],
        },
        "mm": {
            "figures": mm,
            "ratio": r2["flashinfer.mm auto, opaque (tuned op)"],
            "decided_ratio": r2[DECIDED],
        },
    }


def signature_floor() -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The least a Python dispatcher keyed on the call's metadata adds: read each tensor's
    shape, strides, dtype and device, look the tuple up, call the kernel."""
    seen: dict[tuple, Any] = {}
    mm = torch.mm

    def floor(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        key = (a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, b.device)
        if seen.get(key) is None:
            seen[key] = mm
        return mm(a, b)

    return floor


def state_floor() -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The signature floor that also reads what a choice made at run time depends on
    (issue 31, item 2), each the cheapest way Python can: the autocast flag, the two
    environment variables the choice reads (the experimental gate, TRITON_INTERPRET),
    this thread's ``use_backends`` state, and the tuned result for the signature."""
    seen: dict[tuple, Any] = {}
    tuned: dict[tuple, Any] = {}
    mm = torch.mm
    env = os.environ._data  # type: ignore[attr-defined]  # what os.environ.get reads
    gate, interpret = os.environ.encodekey(GATE), os.environ.encodekey("TRITON_INTERPRET")
    autocast_on = torch._C._is_any_autocast_enabled
    block = threading.local()
    block.entered = None

    def floor(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if autocast_on():
            raise RuntimeError("not timed under autocast")
        key = (a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, b.device)
        key += (env.get(gate), env.get(interpret), block.entered)
        if seen.get(key) is None:
            seen[key] = mm
        tuned.get((a.shape, a.dtype, b.shape, b.dtype, a.device))
        return mm(a, b)

    return floor


GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def eager(number: int, repeat: int) -> dict[str, Any]:
    x, w = randn(4, 256), randn(256)
    a, b = randn(8, 64), randn(64, 64)
    floor = signature_floor()
    decided = state_floor()
    figures = timed(
        {
            "flashinfer.rmsnorm auto 4x256": lambda: flashinfer.rmsnorm(x, w, EPS),
            "F.rms_norm 4x256": lambda: F.rms_norm(x, (256,), w, EPS),
            "flashinfer.mm auto 8x64x64": lambda: flashinfer.mm(a, b),
            "torch.mm 8x64x64": lambda: torch.mm(a, b),
            "signature floor (torch.mm) 8x64x64": lambda: floor(a, b),
            STATE_FLOOR: lambda: decided(a, b),
        },
        number * 10,
        repeat,
    )
    print("\n5. eager")
    rms = figures["flashinfer.rmsnorm auto 4x256"]["median"] / figures["F.rms_norm 4x256"]["median"]
    base = figures["torch.mm 8x64x64"]["median"]
    added = figures["flashinfer.mm auto 8x64x64"]["median"] - base
    floor_added = figures["signature floor (torch.mm) 8x64x64"]["median"] - base
    state_added = figures[STATE_FLOOR]["median"] - base
    for name, f in figures.items():
        print(f"  {name:<44} best {f['best']:9.2f} us  median {f['median']:9.2f} us")
    print(
        f"  rmsnorm auto / F.rms_norm: {rms:.2f}x;  mm auto - torch.mm: {added:+.2f} us;  "
        f"signature floor - torch.mm: {floor_added:+.2f} us;  "
        f"the same reading the state - torch.mm: {state_added:+.2f} us"
    )
    return {
        "figures": figures,
        "rmsnorm_ratio": rms,
        "mm_added_us": added,
        "signature_floor_added_us": floor_added,
        "state_floor_added_us": state_added,
    }


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 31's table: each figure, its target, met or not."""
    rows: list[dict[str, Any]] = []

    def row(figure: str, value: float, target: float, unit: str, floor: str = "") -> None:
        met = value <= target
        rows.append({"figure": figure, "value": value, "target": target, "met": met})
        shown = f"{value:.2f}{unit}"
        limit = f"<= {target:.2f}{unit}"
        note = "met" if met else f"MISSED{'; ' + floor if floor else ''}"
        print(f"  {figure:<58} {shown:>9}  {limit:>10}  {note}")

    print("\n6. targets (medians)")
    for shape, fig in result["compiled_call"].items():
        row(f"compiled rmsnorm {shape} / compiled torch math", fig["ratio"], 1.1, "x")
    kernels = result["chained_kernels"]
    differ = max(abs(kernels[k] - kernels["torch math"]) for k in kernels)
    row("three chained calls: kernels other than the torch math's", differ, 0, "")
    if "llama" in result:
        row("tiny llama patched / unpatched, compiled", result["llama"]["ratio"], 1.05, "x")
    for name, fig in result["opaque"].items():
        decided = fig.get("decided_ratio")
        why = (
            f"a bare operator making the run-time choice (calling flashinfer) is {decided:.2f}x"
            if decided is not None
            else ""
        )
        row(f"opaque {name} / bare operator (the opaque floor)", fig["ratio"], 1.1, "x", why)
    ev = result["eager"]
    row("eager rmsnorm auto 4x256 / F.rms_norm", ev["rmsnorm_ratio"], 1.25, "x")
    floor = ev["signature_floor_added_us"]
    row(
        "eager mm auto 8x64x64: us added over torch.mm",
        ev["mm_added_us"],
        floor + 0.5,
        "",
        f"the signature floor alone adds {floor:.2f} us, and "
        f"{ev.get('state_floor_added_us', float('nan')):.2f} us reading the state",
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="8x256 only, no llama")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--compiler", default="inductor", help="torch.compile's backend (tests: eager)"
    )
    parser.add_argument(
        "--mode", default=None, help="torch.compile's mode, e.g. reduce-overhead (CUDA graphs)"
    )
    args = parser.parse_args(argv)
    global DEVICE, MODE, COMPILER
    DEVICE, MODE, COMPILER = args.device, args.mode, args.compiler
    if DEVICE == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available")
    torch.set_num_threads(1)
    shapes = ["8x256"] if args.quick else ["8x256", "128x4096", "1024x4096"]
    print(
        f"flashinfer from {flashinfer.__file__}; torch {torch.__version__}; "
        f"device {DEVICE}; mode {MODE or 'default'}"
    )
    result = {
        "compiled_call": compiled_call(shapes, args.number, args.repeat),
        "chained_kernels": chained(),
        "opaque": opaque(args.number, args.repeat),
        "eager": eager(args.number, args.repeat),
    }
    if not args.quick:
        result["llama"] = llama(args.number, args.repeat)
    result["targets"] = targets(result)
    result["device"], result["mode"], result["compiler"] = DEVICE, MODE, COMPILER
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
