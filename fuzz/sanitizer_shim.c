/* What clang 17 and later's instrumentation calls and the ASan runtime atheris ships lacks
 * (fuzz/build.sh builds this, fuzz/run.sh preloads it after that runtime). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__sanitizer_internal_memcpy(void *to, const void *from, size_t size) {
    return memcpy(to, from, size);
}

void *__sanitizer_internal_memmove(void *to, const void *from, size_t size) {
    return memmove(to, from, size);
}

void *__sanitizer_internal_memset(void *to, int value, size_t size) {
    return memset(to, value, size);
}

/* -fsanitize=function (off in fuzz/build.sh, as Cython's vtable calls trip it): a call through
 * a function pointer of another type than the function's (the runtime's handler lives in its
 * C++ part, which atheris does not ship with ASan). */
void __ubsan_handle_function_type_mismatch_abort(void *data, void *function) {
    (void)data;
    fprintf(stderr, "runtime error: call to function %p through a pointer of another type\n",
            function);
    abort();
}
