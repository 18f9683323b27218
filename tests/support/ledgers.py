"""Ledger helpers shared by the ledger's tests."""

from __future__ import annotations

import os
import threading

from dpkit.ledger import Ledger


def open_at_once(location: str | os.PathLike[str], openers: int) -> list[BaseException]:
    """Open the ledger at ``location`` from ``openers`` threads released together (a barrier),
    as concurrent processes would (e.g. each migrating an older ledger); what they raised."""
    barrier = threading.Barrier(openers)
    errors: list[BaseException] = []

    def open_it() -> None:
        barrier.wait()
        try:
            Ledger(location).close()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=open_it) for _ in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors
