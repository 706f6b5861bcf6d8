/* What OpenMP code sizes its thread team by: omp_get_max_threads() (gcc's libgomp reads
   OMP_NUM_THREADS, else the CPUs in the affinity mask; it ignores CPU quotas). */
#include <omp.h>
#include <stdio.h>

int main(void) {
    printf("%d\n", omp_get_max_threads());
    return 0;
}
