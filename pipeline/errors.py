"""The one family of errors an operator can act on.

Each carries the exit code its command ends with; commands print the message as one line and
exit with that code instead of mapping unrelated exceptions by hand.
"""

from __future__ import annotations


class StompLakeError(Exception):
    """An error worth one line to the operator, not a traceback."""

    exit_code: int = 1


class UsageError(StompLakeError):
    """Bad arguments or inputs, found before any work starts."""

    exit_code = 2


class DiskFull(StompLakeError):
    """No space left on the device a run was writing to; what was committed stays committed,
    and the same run, once there is space, goes on from there (`pipeline.lake.full_disk`)."""

    exit_code = 1
