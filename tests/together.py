"""Fresh interpreters started together. Each spends about 3 s of one core importing torch, so a
test's independent runs overlap on a 2-core machine instead of queueing one after another."""
import subprocess
import sys


def run_together(runs, timeout=300):
    """runs: (args to python, env) pairs. Returns their CompletedProcess in the same order."""
    procs = [subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for args, env in runs]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done
