/* Every rank adds its rank + 1; rank 0 prints the sum, which only a job
 * whose ranks reach each other gets right. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, mine, sum = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (sum != size * (size + 1) / 2) {
        fprintf(stderr, "rank %d: sum %d is wrong\n", rank, sum);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0)
        printf("sum %d over %d ranks\n", sum, size);
    MPI_Finalize();
    return 0;
}
