#!/usr/bin/env python3
"""PyTorch attention baseline for attn-wgpu: the command line of the `sdpa_bench` package beside this file.

    python3 bench/torch_sdpa.py --dtype f16 --json /tmp/torch_f16.json
    python3 bench/torch_sdpa.py --help

What it measures and how it validates: bench/sdpa_bench/__init__.py (one concern a file: backends.py,
timing.py, validation.py, runner.py, cli.py) and docs/correctness.md.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sdpa_bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
