from __future__ import annotations

import sys

from capture.cli import main

sys.exit(main())
