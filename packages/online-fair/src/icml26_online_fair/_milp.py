"""scipy's HiGHS MILP, without HiGHS's C-level chatter on stdout.

HiGHS writes some diagnostics ("HighsMipSolverData::transformNewIntegerFeasibleSolution ...")
straight to file descriptor 1 even with ``disp=False``; ``solve`` points fds 1 and 2 at /dev/null
for the duration of the solve (Python-level ``sys.stdout`` redirection cannot catch C writes).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from scipy.optimize import milp


@contextlib.contextmanager
def _silenced_fds() -> Iterator[None]:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = []
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:  # pragma: no cover - no /dev/null: stay noisy rather than fail
        yield
        return
    try:
        for fd in (1, 2):
            try:
                saved.append((fd, os.dup(fd)))
                os.dup2(devnull, fd)
            except OSError:  # pragma: no cover - fd closed (e.g. a daemon)
                pass
        yield
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)


def solve(problem: dict, options: dict):
    """``scipy.optimize.milp(**problem, options=options)`` silently; retried without presolve
    when HiGHS's presolve fails internally (a rare ValueError)."""
    with _silenced_fds():
        try:
            return milp(**problem, options=options)
        except ValueError:
            return milp(**problem, options={**options, "presolve": False})
