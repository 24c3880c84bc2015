"""Where a sweep's figures came from: the commit, the date, torch, and the tpu build, so a
committed summary can be checked against the code it ran on."""
import datetime
import os
import subprocess


def _git(*args):
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def stamp() -> dict:
    """{commit, dirty, date, torch, isa}: commit is None outside a git checkout (an installed wheel)."""
    import torch

    import torch_tpu._runtime as runtime

    commit = _git("rev-parse", "--short=12", "HEAD")
    return {"commit": commit,
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")) if commit else None,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "torch": torch.__version__, "isa": runtime.load()}


def describe(records_stamps=()) -> str:
    """One Markdown line for a summary's head. `records_stamps` are the commits the records were
    made on (a resumed sweep mixes runs); each is named, so no figure claims a commit it did not run on."""
    s = stamp()
    commit = f"`{s['commit']}`{' with uncommitted changes' if s['dirty'] else ''}" if s["commit"] else "no git checkout"
    line = f"Written {s['date']} on commit {commit}, torch {s['torch']}, tpu build {s['isa']}."
    older = sorted({c for c in records_stamps if c and c != s["commit"]})
    if older:
        line += f" Some records come from earlier runs, on commits {', '.join(f'`{c}`' for c in older)}."
    return line
