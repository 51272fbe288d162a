"""Type aliases shared by the capture readers."""

from __future__ import annotations

import mmap
from typing import TypeAlias

Buffer: TypeAlias = bytes | bytearray | mmap.mmap
