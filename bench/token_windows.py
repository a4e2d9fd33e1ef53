"""The tokenizer on hostile texts, handed whole and in windows (``proxy.token_windows``): seconds
and the process's peak memory above its start (RSS, which sees tiktoken's native memory), each
text in a process of its own; and whether the two counts agree.

    .venv/bin/python -m bench.token_windows [--encoding o200k_base]

A text's count in windows is what ``TiktokenCounter.count_text`` returns; whole is one
``encode_ordinary`` call (a panic is reported as such)."""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

TEXTS = {
    "2 MB of $(": lambda: "$(" * 1_000_000,
    "8 MB of echo $($(…": lambda: "echo " + "$(" * 4_000_000,
    "30 MB of one letter": lambda: "x" * 30_000_000,
    "1 M spaces": lambda: " " * 1_000_000,
    "2 MB of prose": lambda: "The quick brown fox, jumps.\n" * 71_000,
}


def measure(name: str, encoding: str, windowed: bool) -> dict[str, object]:
    """One text, one way, in this process: seconds, peak RSS above the start, the count."""
    from proxy.tokens import TiktokenCounter, _encoding

    text = TEXTS[name]()
    encode = _encoding(encoding).encode_ordinary
    counter = TiktokenCounter(encoding, cache_chars=0)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    try:
        n: int | str = counter.count_text(text) if windowed else len(encode(text))
    except BaseException as exc:  # tiktoken's panic is no Exception
        n = type(exc).__name__
    seconds = time.perf_counter() - started
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    return {"seconds": round(seconds, 2), "peak_mib": round(peak), "tokens": n, "chars": len(text)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoding", default="o200k_base")
    parser.add_argument("--one", nargs=2, metavar=("TEXT", "WAY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.encoding, args.one[1] == "windows")))
        return
    print("| text | whole: s, peak MiB | in windows: s, peak MiB | counts |")
    print("|---|---|---|---|")
    for name in TEXTS:
        got = {}
        for way in ("whole", "windows"):
            cmd = [sys.executable, "-m", "bench.token_windows", "--encoding", args.encoding,
                   "--one", name, way]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            got[way] = json.loads(out.strip().splitlines()[-1])
        whole, windows = got["whole"], got["windows"]
        same = (
            "same"
            if whole["tokens"] == windows["tokens"]
            else f"{whole['tokens']} / {windows['tokens']}"
        )
        print(f"| {name} | {whole['seconds']}, {whole['peak_mib']} | "
              f"{windows['seconds']}, {windows['peak_mib']} | {same} |")  # fmt: skip


if __name__ == "__main__":
    main()
