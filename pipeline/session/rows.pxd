# Compiled from rows.py (pipeline.compiled.SOURCE_MODULES): the per-message helper typed.

import cython


@cython.locals(user=dict)
cpdef dict user_headers(dict headers)
