/* One rank of an allreduce through the C interface: argv[1] is the host
 * configuration file, argv[2] the rank. Rank r contributes r + 1 to each of N values;
 * prints "ok" if every value is the sum over the job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlt.h"

#define N 100000

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *text = malloc(size + 1);
    if (fread(text, 1, size, f) != (size_t)size) { fclose(f); free(text); return NULL; }
    text[size] = '\0';
    fclose(f);
    return text;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: allreduce CONFIG RANK WORLD\n"); return 2; }
    char *config = slurp(argv[1]);
    int rank = atoi(argv[2]), world = atoi(argv[3]);
    if (!config) { fprintf(stderr, "cannot read %s\n", argv[1]); return 1; }
    mlt_transport *t = mlt_start(config, 20000);
    free(config);
    if (!t) { fprintf(stderr, "start: %s\n", mlt_last_error()); return 1; }
    static float data[N];
    for (int i = 0; i < N; i++) data[i] = (float)(rank + 1);
    int64_t op = mlt_post_allreduce(t, 5, data, N, 0, 0.0);
    if (op < 0) { fprintf(stderr, "post: %s\n", mlt_last_error()); return 1; }
    mlt_completion c;
    int got = mlt_wait_cq(t, &c, 20000);
    if (got != 1 || c.op != (uint64_t)op || c.status != 0) {
        fprintf(stderr, "completion: got %d status %d %s\n", got, c.status, c.error);
        return 1;
    }
    float want = (float)(world * (world + 1) / 2);
    for (int i = 0; i < N; i++) {
        if (data[i] != want) { fprintf(stderr, "value %d is %f, not %f\n", i, data[i], want); return 1; }
    }
    mlt_stop(t);
    printf("ok %.3f %.3f\n", c.delivered, c.exact);
    return 0;
}
