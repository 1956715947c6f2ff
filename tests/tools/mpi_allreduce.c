// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mpi_allreduce: MPI_Allreduce (sum) over several message sizes, every element
 * checked against its closed form on every rank.
 *
 *   mpirun -np N mpi_allreduce [ITERATIONS]
 *
 * Rank r contributes r * 1000003 + i + it to element i of iteration it, so the
 * sum is known exactly (int64, no rounding) and differs per element, rank and
 * iteration: a lost, duplicated, misplaced or stale chunk shows up. Sizes go
 * from one element (UCX's eager short path) to 4 MiB (its rendezvous path, the
 * RDMA READ/WRITE of whole buffers). Prints one line per size on rank 0 and
 * "allreduce: OK" at the end; exits 1 on any wrong element.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>

static const int counts[] = { 1, 1000, 65536, 524288 };	/* int64s: 8 B to 4 MiB */

int main(int argc, char **argv)
{
	int rank, size, iters = argc > 1 ? atoi(argv[1]) : 3;
	long bad = 0, all_bad = 0;
	unsigned int k;
	int it, i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		int n = counts[k];
		int64_t *in = malloc(n * sizeof(*in)), *out = malloc(n * sizeof(*out));

		if (!in || !out)
			MPI_Abort(MPI_COMM_WORLD, 2);
		for (it = 0; it < iters; it++) {
			/* sum over r of (r * 1000003 + i + it) */
			int64_t ranks_sum = (int64_t)size * (size - 1) / 2 * 1000003;

			for (i = 0; i < n; i++) {
				in[i] = (int64_t)rank * 1000003 + i + it;
				out[i] = -1;
			}
			MPI_Allreduce(in, out, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
			for (i = 0; i < n; i++) {
				int64_t want = ranks_sum + (int64_t)size * (i + it);

				if (out[i] != want && bad++ < 5)
					fprintf(stderr, "rank %d: count %d iteration %d element %d: %" PRId64
						" want %" PRId64 "\n", rank, n, it, i, out[i], want);
			}
		}
		if (rank == 0)
			printf("allreduce: %d ranks, %d x %zu bytes: %s\n", size, iters,
			       n * sizeof(int64_t), bad ? "WRONG" : "ok");
		free(in);
		free(out);
	}
	MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("allreduce: %s (%ld wrong elements)\n", all_bad ? "FAILED" : "OK", all_bad);
	MPI_Finalize();
	return all_bad ? 1 : 0;
}
