"""Create the peer libraries' virtual environments, outside the repository.

Run: ``python benchmarks/peers/make_venvs.py [--root /tmp/dpkit-peers] [central] [ldp]
[accounting] [queries] [telemetry] [sql]``

Each environment gets its requirements file (``requirements-<kind>.txt``, next to this script);
``central`` and ``ldp`` also get dpkit itself, installed from this checkout (``pip install -e``),
so that the worker (``worker.py``) times the peer and dpkit in the same process, with the same
harness. ``accounting`` (for ``peer_accounting.py``; dp-accounting pins attrs < 24) and
``queries`` (for ``_peer_queries.py``), ``telemetry`` (pure-ldp's sketches and heavy
hitters, for ``peer_telemetry.py``; they need numpy < 2 and xxhash < 4) and ``sql``
(SmartNoise SQL, for ``_peer_sql.py``; it pins its own OpenDP) hold the peer alone. The peers
do not install next to each other or next to dpkit's test environment (numpy and scikit-learn
pins; see ``../shared/reference`` notes), hence one environment per group. The benchmarks
find the environments under ``--root`` (or ``$DPKIT_PEERS``); nothing is written into the
repository.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[1]
KINDS = ("central", "ldp", "accounting", "queries", "telemetry", "sql")
#: The kinds whose worker imports dpkit (timed next to the peer in the same process).
WITH_DPKIT = ("central", "ldp")


def default_root() -> Path:
    return Path(os.environ.get("DPKIT_PEERS", "/tmp/dpkit-peers"))


def make(kind: str, root: Path) -> Path:
    target = root / kind
    python = target / "bin" / "python"
    if not python.exists():
        print(f"creating {target}")
        venv.EnvBuilder(with_pip=True, clear=False).create(target)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "-r", str(HERE / f"requirements-{kind}.txt")], check=True)
    if kind in WITH_DPKIT:
        subprocess.run([*pip, "-e", str(REPOSITORY)], check=True)
    print(f"{kind}: {python}")
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("kinds", nargs="*", help=f"any of {', '.join(KINDS)} (default: all)")
    parser.add_argument("--root", type=Path, default=default_root())
    args = parser.parse_args()
    kinds = args.kinds or list(KINDS)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"unknown kind(s) {unknown}; choose from {list(KINDS)}")
    for kind in kinds:
        make(kind, args.root)
    print(f"done; the benchmarks look for them under {args.root} (or $DPKIT_PEERS)")
    sys.exit(0)


if __name__ == "__main__":
    main()
