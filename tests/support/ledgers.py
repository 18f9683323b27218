"""Ledger helpers shared by the ledger's tests."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from dpkit.ledger import Ledger


def at_once(task: Callable[[threading.Barrier], object], threads: int) -> list[BaseException]:
    """Run ``task`` in ``threads`` threads, each given one barrier that releases them together
    (each calls its ``wait()`` just before the step that races); what they raised."""
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            task(barrier)
        except BaseException as error:
            errors.append(error)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return errors


def open_at_once(location: str | os.PathLike[str], openers: int) -> list[BaseException]:
    """Open the ledger at ``location`` from ``openers`` threads released together, as
    concurrent processes would (e.g. each migrating an older ledger); what they raised."""

    def open_it(barrier: threading.Barrier) -> None:
        barrier.wait()
        Ledger(location).close()

    return at_once(open_it, openers)
