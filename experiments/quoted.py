"""Numbers the docs quote from experiments, filled in from the experiments' committed results, never typed.

A quoted number is followed by a marker that says where it comes from: an experiment, an expression over that
experiment's `results/NAME/numbers.json` and a format, e.g.

    dc needs up to 1.48x<!--= dchoices-memory worst["dc/pkg_run"] | .2f --> pkg's memory

The expression sees the numbers' top-level keys as names (and `n`, the whole), `took_s` (the run's wall seconds, from
its `COMMAND`: a folder may have only that), plus min, max, sum, len, abs, round, next, sorted, any, all and
`pick(rows, field=value, ...)`, the row whose fields match.

The pseudo-name `experiments` stands for every registered experiment's folder at once (`experiments.names()`, not
the benchmarks' and scripts' folders beside them in results/): there `took_s` is the sum of their `COMMAND`s' wall
seconds, what a full `reproduce.py --all` took, `took` the seconds per experiment and `missing` the registered
experiments whose folder records no wall time (left out of the sum), e.g.

    --all takes about 6.1<!--= experiments took_s / 3600 | .1f --> hours
`scripts/quote_numbers.py` rewrites every marked number from the files, and the test suite checks that the docs
already say what the files hold, so a rerun that moves a result moves the docs with it or fails the suite.

A command's printed output shown whole (the README's first run) is a copy: a code block right after
`<!--copy results/NAME/output.txt-->` holds that file's text, trailing spaces left out, and is filled in the same way.
A results file that is itself markdown (a table) is copied as markdown, not as a code block: everything between
`<!--table results/NAME/FILE.md-->` and `<!--/table-->` is that file's text, trailing spaces left out.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from experiments.provenance import took_seconds

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/*.md")
# the number (digits, separators, a decimal part, an exponent) right before a marker, and the marker itself
MARKED = re.compile(r"(?P<value>-?[\d,]*\.?\d+(?:e[-+]?\d+)?)<!--=\s*(?P<name>[\w-]+)\s+(?P<expr>.+?)\s*\|\s*"
                    r"(?P<fmt>[^|]*?)\s*-->")


# a code block that copies a results file: the marker, the fence line, the body, the closing fence
COPY = re.compile(r"(?P<head><!--copy (?P<path>results/[\w./-]+)-->\n```[^\n]*\n)(?P<body>.*?)(?P<tail>^```$)",
                  re.S | re.M)
# markdown that copies a results file as markdown: the opening marker, the body, the closing marker
TABLE = re.compile(r"(?P<head><!--table (?P<path>results/[\w./-]+)-->\n)(?P<body>.*?)(?P<tail>^<!--/table-->$)",
                   re.S | re.M)
COPIES = (COPY, TABLE)


def pick(rows: list[dict], **match: object) -> dict:
    """The row of `rows` whose fields have the given values (the first, if several)."""
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    raise LookupError(f"no row with {match}")


SAFE = {"min": min, "max": max, "sum": sum, "len": len, "abs": abs, "round": round, "next": next, "sorted": sorted,
        "any": any, "all": all, "pick": pick}


class QuoteError(ValueError):
    """A marker that names no experiment, or whose expression does not evaluate."""


ALL = "experiments"  # the pseudo-name of every registered experiment's folder at once


def wall_times(root: Path = ROOT) -> dict[str, float | None]:
    """Per registered experiment, in registration order, the wall seconds its `results/NAME/COMMAND` records (None if
    it has no COMMAND or the COMMAND no wall time)."""
    from experiments.registry import names  # the experiments' modules load only when a marker asks for them

    out: dict[str, float | None] = {}
    for name in names():
        command = root / "results" / name / "COMMAND"
        out[name] = took_seconds(command.read_text()) if command.exists() else None
    return out


@cache
def numbers(name: str, root: Path = ROOT) -> tuple[dict, float | None]:
    """What a marker naming `name` sees: its numbers.json ({} if the folder has only a COMMAND), and the run's wall
    seconds from its COMMAND (None if it has none)."""
    folder = root / "results" / name
    path, command = folder / "numbers.json", folder / "COMMAND"
    took = took_seconds(command.read_text()) if command.exists() else None
    if not path.exists() and took is None:
        raise QuoteError(f"no {path.relative_to(root)} (nor a COMMAND with its wall time) for a quoted number")
    return (json.loads(path.read_text()) if path.exists() else {}), took


def value(name: str, expr: str, fmt: str, root: Path = ROOT) -> str:
    """The text of one quoted number."""
    try:
        return format(evaluate(name, expr, root), fmt)
    except QuoteError:
        raise
    except Exception as exc:
        raise QuoteError(f"{name} {expr!r} | {fmt!r}: {type(exc).__name__}: {exc}") from None


def copied(path: str, root: Path = ROOT) -> str:
    """The body of a copy of results file `path` (a code block's, or a table's): its lines without trailing
    spaces."""
    file = root / path
    if not file.is_file():
        raise QuoteError(f"no {path} for a copied output")
    return "".join(line.rstrip() + "\n" for line in file.read_text().rstrip("\n").splitlines())


def fill(text: str, root: Path = ROOT) -> str:
    """`text` with every marked number as its experiment's results say, and every copy as its file holds."""
    for form in COPIES:
        text = form.sub(lambda m: m["head"] + copied(m["path"], root) + m["tail"], text)
    return MARKED.sub(lambda m: value(m["name"], m["expr"], m["fmt"], root) + m[0][len(m["value"]):], text)


def documents(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in DOCS for p in root.glob(pattern)})


def stale(root: Path = ROOT) -> list[tuple[Path, int, str, str]]:
    """(document, line, says, results say) of every marked number that differs from its results."""
    out = []
    for doc in documents(root):
        text = doc.read_text()
        for m in (m for form in COPIES for m in form.finditer(text)):
            if m["body"] != copied(m["path"], root):
                out.append((doc.relative_to(root), text.count("\n", 0, m.start("body")) + 1,
                            f"a copy of {m['path']}", "another text"))
        for i, line in enumerate(text.splitlines(), 1):
            for m in MARKED.finditer(line):
                now = value(m["name"], m["expr"], m["fmt"], root)
                if now != m["value"]:
                    out.append((doc.relative_to(root), i, m["value"], now))
    return out


def marked(root: Path = ROOT) -> int:
    """How many numbers the docs quote with a marker (a copied output or table counts as one)."""
    return sum(len(MARKED.findall(text)) + sum(len(form.findall(text)) for form in COPIES)
               for text in (doc.read_text() for doc in documents(root)))


def quote(root: Path = ROOT) -> list[Path]:
    """Rewrite every document whose marked numbers are stale; the documents rewritten."""
    changed = []
    for doc in documents(root):
        text = doc.read_text()
        new = fill(text, root)
        if new != text:
            doc.write_text(new)
            changed.append(doc)
    return changed


def evaluate(name: str, expr: str, root: Path = ROOT) -> Any:
    """The value of `expr` over experiment `name`'s numbers (its top-level keys as names, and `n`), or for `ALL`
    over every registered experiment's wall time (`took_s` their sum, `took` per experiment, `missing`)."""
    if name == ALL:
        times = wall_times(root)
        took_each = {k: v for k, v in times.items() if v is not None}
        scope = {"took_s": sum(took_each.values()), "took": took_each,
                 "missing": [k for k, v in times.items() if v is None]}
    else:
        found, took = numbers(name, root)
        scope = {**(found if isinstance(found, dict) else {}), "n": found, "took_s": took}
    # the names as globals, so that a comprehension's body sees them too
    return eval(expr, {"__builtins__": SAFE, **scope})  # noqa: S307 (the project's own docs, over its own files)
