/* A C program that links liblowbit through pkg-config: quantize a random matrix to TQ2_0, multiply
 * it by a vector, and print the result (examples/run.sh compares it with pylowbit's numpy API).
 *
 *     export PKG_CONFIG_PATH=$(python -c "import pylowbit; print(pylowbit.get_pkgconfig_dir())")
 *     cc gemv.c $(pkg-config --cflags --libs lowbit) -o gemv && ./gemv 64 512
 */
#include <stdio.h>
#include <stdlib.h>

#include "lowbit/lowbit.h"

/* Inputs examples/run.sh can make again in numpy, exactly. */
static float value(long i) { return (float)((i * 7919 % 2003) - 1001) / 1001.0f; }

int main(int argc, char **argv) {
    long rows = argc > 1 ? atol(argv[1]) : 64, cols = argc > 2 ? atol(argv[2]) : 512;
    if (lowbit_abi_version() != LOWBIT_ABI_VERSION) {
        fprintf(stderr, "liblowbit ABI %d, this program was built for %d\n", lowbit_abi_version(),
                LOWBIT_ABI_VERSION);
        return 2;
    }
    float *w = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * cols);
    float *y = malloc(sizeof(float) * rows);
    int64_t nbytes = lowbit_tensor_bytes(LOWBIT_TYPE_TQ2_0, rows * cols);
    void *q = nbytes > 0 ? malloc(nbytes) : NULL;
    if (!w || !x || !y || !q) {
        fprintf(stderr, "%ld x %ld: no memory, or not a whole number of TQ2_0 blocks\n", rows, cols);
        return 1;
    }
    for (long i = 0; i < rows * cols; i++) w[i] = value(i);
    for (long i = 0; i < cols; i++) x[i] = value(i + 17);
    int st = lowbit_quantize(LOWBIT_TYPE_TQ2_0, w, rows * cols, q);
    if (st == LOWBIT_OK) st = lowbit_gemv(LOWBIT_TYPE_TQ2_0, q, rows, cols, x, y, 0);
    if (st != LOWBIT_OK) {
        fprintf(stderr, "lowbit: %s\n", lowbit_status_str(st));
        return 1;
    }
    for (long r = 0; r < rows; r++) printf("%.9g\n", y[r]);
    fprintf(stderr, "%s %ld x %ld on %s\n", lowbit_version(), rows, cols,
            lowbit_isa_name(lowbit_isa_active()));
    free(w), free(x), free(y), free(q);
    return 0;
}
