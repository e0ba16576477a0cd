"""Reproduce the paper's central claim at small scale; prints one JSON line.

Keys: package, claim, paper, ours, baseline, ratio, seconds.
"""

import sys

if __name__ == "__main__":
    sys.exit("benchmarks/reproduce.py for icml26-rcfcl is not written yet")
