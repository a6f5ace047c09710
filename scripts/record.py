#!/usr/bin/env python3
"""Run a command and keep what it printed as a result: `record.py results/NAME -- COMMAND...` runs COMMAND, shows
its output as it comes, and on success writes results/NAME/output.txt (its standard output) and results/NAME/COMMAND
(the command, the commit, the UTC date and the wall time), so that a benchmark's or a script's numbers carry
their provenance as the experiments' folders do. With --numbers, the command's last line (a benchmark's `--json`)
becomes results/NAME/numbers.json, which the docs quote as they quote an experiment's. A command that fails writes
nothing."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from experiments import provenance  # noqa: E402


def shown(argv: list[str]) -> list[str]:
    """The command as COMMAND shows it: any Python interpreter as `python`, paths inside the checkout relative to
    it (no path of the machine that ran it)."""
    out = []
    for i, arg in enumerate(argv):
        if i == 0 and Path(arg).name.startswith("python"):
            out.append("python")
            continue
        path = Path(arg)
        if path.is_absolute():
            try:
                arg = str(path.resolve().relative_to(provenance.ROOT))
            except ValueError:
                pass
        out.append(arg)
    return out


def _write(folder: Path, files: dict[str, str]) -> None:
    """Each file appears whole or not at all (written aside, then renamed)."""
    for name, text in files.items():
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, folder / name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__,
                                usage="record.py [-h] [--output FILE] [--numbers] FOLDER -- COMMAND [ARG ...]")
    p.add_argument("folder", type=Path, help="the results folder to write (created if missing)")
    p.add_argument("--output", default="output.txt",
                   help="file in FOLDER for the command's standard output (default: output.txt); its standard "
                        "error (progress bars) is shown, not kept")
    p.add_argument("--numbers", action="store_true",
                   help="keep the command's last line of standard output, a JSON object (a benchmark's --json), as "
                        "FOLDER/numbers.json, and leave it out of the output file")
    p.add_argument("command", nargs="*", help="the command to run, after --")
    # the command is everything after the first --, so its own options never reach this parser
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])
    command = argv[cut + 1:]
    if args.command or not command:
        print("record.py: error: give the command to run after --", file=sys.stderr)
        return 2
    if "/" in args.output or args.output in ("", ".", "..", "COMMAND"):
        print(f"record.py: error: --output {args.output!r} must be a plain file name other than COMMAND",
              file=sys.stderr)
        return 2
    fresh = not args.folder.exists()  # a folder made here and left empty goes again
    try:
        args.folder.mkdir(parents=True, exist_ok=True)
        probe = tempfile.TemporaryFile(dir=args.folder)  # fail before the run, not after it
        probe.close()
    except OSError as exc:
        print(f"record.py: error: cannot write to {args.folder}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    status = _run(command, args.folder, args.output, args.numbers)
    if status != 0 and fresh and not any(args.folder.iterdir()):
        args.folder.rmdir()
    return status


def _numbers(lines: list[str]) -> str | None:
    """numbers.json's text from the output's last line, or None when that line is not a JSON object."""
    try:
        numbers = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    return json.dumps(numbers, indent=2) + "\n" if isinstance(numbers, dict) else None


def _run(command: list[str], folder: Path, output: str, numbers: bool = False) -> int:
    clock, at = time.perf_counter(), provenance.commit()
    lines: list[str] = []
    try:
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1) as proc:
            assert proc.stdout is not None
            echo = True
            for line in proc.stdout:
                lines.append(line)
                if echo:
                    try:
                        sys.stdout.write(line)
                        sys.stdout.flush()
                    except BrokenPipeError:  # a reader that left (`| head`) does not stop the record
                        echo = False
                        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (nothing more to show)
            status = proc.wait()
    except OSError as exc:
        print(f"record.py: error: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("record.py: interrupted; nothing written", file=sys.stderr)
        return 130
    if status != 0:
        print(f"record.py: {shown(command)[0]} exited with status {status}; nothing written", file=sys.stderr)
        return status
    seconds = time.perf_counter() - clock
    files = {output: "".join(lines)}
    if numbers:
        text = _numbers(lines)
        if text is None:
            print(f"record.py: error: {shown(command)[0]}'s last line is not a JSON object (--numbers); nothing "
                  "written", file=sys.stderr)
            return 2
        files = {output: "".join(lines[:-1]), "numbers.json": text}
    try:
        _write(folder, {**files, "COMMAND": provenance.ran_text(shown(command), seconds, at)})
    except OSError as exc:
        print(f"record.py: error: cannot write to {folder}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"record.py: wrote {', '.join(str(folder / name) for name in [*files, 'COMMAND'])} ({seconds:.0f} s)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
