"""Where Flink's jars and a JDK are, and the topology job compiled against them once.

The jars come with the `flink` extra (`apache-flink-libraries`, the jars the `apache-flink` wheel ships; `make
flink`); a JDK 17+ (`javac`, `java`) from the system (`make tools`). The job (`TopologyJob.java`) is compiled into
the user's cache, under a directory named by a digest of its source, the Flink version and the compiler's, so a
change to any of them compiles it again and nothing else does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from topo.errors import SpecError

FLINK_VERSION = "2.3.0"
JOB_SOURCE = Path(__file__).with_name("TopologyJob.java")
INSTALL_HINT = "install it with `make flink` (the jars) and `make tools` (a JDK 17+)"


@dataclass(frozen=True)
class Flink:
    """A runnable Flink: its jar directory, the java binary and the compiled job's class directory."""

    lib: Path
    java: str
    classes: Path

    def classpath(self) -> str:
        return os.pathsep.join([str(self.classes), str(self.lib / "*")])


def jar_dir() -> Path | None:
    """pyflink's lib directory (the jars of `apache-flink-libraries`), or None without the extra."""
    spec = importlib.util.find_spec("pyflink")
    for root in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(root) / "lib"
        if (lib / f"flink-dist-{FLINK_VERSION}.jar").is_file():
            return lib
    return None


def _jdk_tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    for token in out.split('"')[1:2]:
        head = token.split(".")[0]
        return int(head) if head.isdigit() else None
    return None


def missing() -> str | None:
    """What is missing for --engine flink, in one line, or None when everything is here."""
    if jar_dir() is None:
        return f"--engine flink needs Flink {FLINK_VERSION}'s jars; {INSTALL_HINT}"
    java, javac = _jdk_tool("java"), _jdk_tool("javac")
    if java is None or javac is None:
        return f"--engine flink needs a JDK 17+ (java and javac); {INSTALL_HINT}"
    major = _java_major(java)
    if major is None or major < 17:
        return f"--engine flink needs Java 17+ (found {major or 'an unknown version'}); {INSTALL_HINT}"
    return None


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stream-groupings" / "flink"


def flink() -> Flink:
    """The jars, java and the compiled job; compiles the job into the cache the first time. SpecError with one line
    if something is missing or the compiler fails."""
    why = missing()
    if why:
        raise SpecError(why)
    lib, java, javac = jar_dir(), _jdk_tool("java"), _jdk_tool("javac")
    stamp = hashlib.sha256(JOB_SOURCE.read_bytes() + FLINK_VERSION.encode() + str(_java_major(javac)).encode())
    classes = cache_root() / stamp.hexdigest()[:16]
    if not (classes / "TopologyJob.class").is_file():
        classes.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=classes.parent) as tmp:
            done = subprocess.run([javac, "-nowarn", "-d", tmp, "-cp", str(lib / "*"), str(JOB_SOURCE)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                first = (done.stderr.strip().splitlines() or ["no output"])[0]
                raise SpecError(f"--engine flink: compiling the Flink job failed: {first}")
            try:
                os.rename(tmp, classes)  # whole or not at all; another process may have won the race
            except OSError:
                if not (classes / "TopologyJob.class").is_file():
                    raise
            else:
                os.makedirs(tmp)  # for TemporaryDirectory's cleanup
    return Flink(lib, java, classes)


if __name__ == "__main__":  # `make flink`: compile the job now, or say in one line what is missing
    import sys

    try:
        print(f"the Flink job is compiled in {flink().classes}")
    except SpecError as exc:
        print(f"python -m topo.flink_engine.install: {exc}", file=sys.stderr)
        sys.exit(2)
