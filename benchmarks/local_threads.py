"""llama.cpp thread and batch settings for the local model on a small, shared machine.

    python benchmarks/local_threads.py [--threads 1,2,auto] [--batches 128,256,512] [--load 0,1] [--runs 3]

For each setting it loads the model with those threads and batch size and times the prefill of a
~400-token prompt (the uncached part of a typical answer prompt) and 32 greedy decode tokens (--decode).
`--load N` runs N busy processes beside it, as another tenant of a shared machine would. `auto` is
the engine's default: before each call, the cores free at that moment (models/cpu.py). Prints
medians; nothing here is pass/fail.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

from harness import parse_args

PROMPT = (
    "Retrieved contexts:\n"
    + "The outdoor sensor runs on two AA batteries and sends readings to the console every 16 seconds "
    "over 868 MHz radio. Battery life is about 18 months with lithium cells and 12 months with "
    "alkaline cells. Mount the sensor mast at least 1.5 metres above the ground. " * 6
    + "\nQuestion: How long does the battery last?"
)


def _busy(stop: multiprocessing.synchronize.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def measure(threads: int, batch: int, runs: int, decode_tokens: int = 32) -> tuple[float, float, int]:
    """threads 0: chosen before each run as the engine does."""
    import llama_cpp
    from llama_cpp import Llama

    from ragline.models.cpu import free_cores
    from ragline.models.gguf import assemble
    from ragline.models.local_engine import CHAT_MODELS, extra_buffers, model_defaults
    from ragline.settings import get_settings

    settings = get_settings()
    spec = CHAT_MODELS[settings.chat_model]
    # loaded as the engine loads it (models/local_engine.py): without llama.cpp's extra buffers on a CPU
    # that advertises AMX, where the first AMX kernel kills the process
    with model_defaults(use_extra_bufts=extra_buffers(settings.local_chat_extra_buffers)):
        llm = Llama(model_path=str(assemble(spec, settings.models_dir)), n_ctx=2048,
                    n_threads=threads or None, n_threads_batch=threads or None, n_batch=batch, verbose=False)
    tokens = llm.tokenize(PROMPT.encode(), add_bos=False)
    prefill, decode = [], []
    for _ in range(runs):
        if not threads:
            chosen = free_cores()
            llama_cpp.llama_set_n_threads(llm._ctx.ctx, chosen, chosen)
        llm.reset()
        llm._ctx.kv_cache_clear()
        started = time.perf_counter()
        llm.eval(tokens)
        token = llm.sample(temp=0)
        prefill.append(len(tokens) / (time.perf_counter() - started))
        started = time.perf_counter()
        for _ in range(decode_tokens):
            llm.eval([token])
            token = llm.sample(temp=0)
        decode.append(decode_tokens / (time.perf_counter() - started))
    llm.close()
    return statistics.median(prefill), statistics.median(decode), len(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,2,auto")
    parser.add_argument("--batches", default="128,512")
    parser.add_argument("--load", default="0,1", help="busy processes running beside the model")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--decode", type=int, default=32, help="greedy tokens decoded per run")
    args = parse_args(parser, threads="auto", batches="128", load="0", runs=1, decode=4)
    print(f"{'busy procs':>10} {'threads':>8} {'batch':>6} {'prefill tok/s':>14} {'decode tok/s':>13}")
    for load in (int(x) for x in args.load.split(",")):
        stop = multiprocessing.Event()
        hogs = [multiprocessing.Process(target=_busy, args=(stop,), daemon=True) for _ in range(load)]
        for hog in hogs:
            hog.start()
        try:
            for threads in (0 if x == "auto" else int(x) for x in args.threads.split(",")):
                for batch in (int(x) for x in args.batches.split(",")):
                    prefill, decode, size = measure(threads, batch, args.runs, args.decode)
                    print(f"{load:10d} {threads or 'auto':>8} {batch:6d} {prefill:14.1f} {decode:13.1f}   ({size}-token prompt)")
        finally:
            stop.set()
            for hog in hogs:
                hog.join()


if __name__ == "__main__":
    main()
