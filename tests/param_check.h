/* param_check.h - shared by test_equiv.c and test_clmpi.c (after ptrain.h): the parameter comparison
   of a parallel run with its single-process reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef PTRAIN_MPI
#include <mpi.h>
#endif

/* worst per-tensor ||p - ref|| / ||ref|| over this rank's parameters (split ones summed over TP of grid) */
static double param_diff(const pt_dist *grid, pt_ctx *ctx, pt_ctx *ref, char *worst, size_t n) {
    double w = 0;
    int i;
    (void)grid; /* used only with PTRAIN_MPI */
    worst[0] = 0;
    for (i = 0; i < pt_param_count(ctx); i++) {
        pt_param *p = pt_param_at(ctx, i), *r = pt_param_find(ref, p->spec.name);
        int64_t j, cnt = pt_numel(&p->value);
        float *a = (float *)malloc((size_t)cnt * sizeof(float)); /* read: the values may be on a device */
        const float *b = r ? pt_f32(&r->value) : NULL;
        double acc[2] = {0, 0}, rel;
        if (!b || !a || pt_tensor_read(&p->value, a) != PT_OK) {
            snprintf(worst, n, "parameter '%s' has no reference or cannot be read", p->spec.name);
            free(a);
            return 1e30;
        }
        for (j = 0; j < cnt; j++) {
            double ref_v = b[pt_spec_global_index(&p->spec, j)], dlt = a[j] - ref_v;
            acc[0] += dlt * dlt, acc[1] += ref_v * ref_v;
        }
        free(a);
#ifdef PTRAIN_MPI
        if (p->spec.split_dim >= 0 && p->spec.split_parts > 1)
            MPI_Allreduce(MPI_IN_PLACE, acc, 2, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(grid, PT_COMM_TP));
#endif
        rel = acc[1] > 0 ? sqrt(acc[0] / acc[1]) : sqrt(acc[0]);
        if (rel > w) {
            w = rel;
            snprintf(worst, n, "'%s' rel %.3g", p->spec.name, rel);
        }
    }
    return w;
}
