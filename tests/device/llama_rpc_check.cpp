// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * llama_rpc_check: a client of ggml's RPC backend (the one llama.cpp's --rpc uses) that checks
 * what comes back, with no model to download.
 *
 *   llama_rpc_check HOST:PORT
 *
 * Through one RPC backend on the server HOST:PORT (tools/rpc's rpc-server): allocates a buffer
 * there, sends a weight matrix W (M x K), an input X (N x K), a bias b (M) and an 8 MiB blob
 * (SET_TENSOR), has the server compute Y = W X + b (GRAPH_COMPUTE: MUL_MAT and ADD on its CPU
 * backend) and reads Y and the blob back (GET_TENSOR). Every input is a small integer, so every
 * element of Y is an integer well below 2^24, exact in f32 whatever order the server sums in:
 * Y is compared exactly with the product computed here, the blob byte for byte. The blob is
 * larger than the RDMA transport's ring of posted receives (24 x 256 KiB): both directions reuse
 * every receive buffer. Prints one line per check and "llama_rpc_check: OK" at the end; exits 1
 * on any difference. ggml logs (the RPC transport's "RDMA probed" and "RDMA activated" lines
 * among them) go to stderr.
 */
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-rpc.h"

static constexpr int64_t K = 512, M = 256, N = 64;
static constexpr int64_t BLOB_WORDS = 2 << 20;  // int32s: 8 MiB

// small integers, different for each tensor and element
static float w_at(int64_t m, int64_t k) { return (float)((m * 5 + k * 3) % 7 - 3); }
static float x_at(int64_t n, int64_t k) { return (float)((n * 3 + k * 11) % 5 - 2); }
static float b_at(int64_t m) { return (float)(m % 13 - 6); }
static int32_t blob_at(int64_t i) { return (int32_t)((uint32_t)i * 2654435761u ^ 0x5bd1e995u); }

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
        return 2;
    }
    const char * endpoint = argv[1];

    // connects, and negotiates the transport (HELLO): the RDMA upgrade happens here
    ggml_backend_t backend = ggml_backend_rpc_init(endpoint, 0);
    if (!backend) {
        fprintf(stderr, "llama_rpc_check: no RPC backend for %s\n", endpoint);
        return 1;
    }
    size_t free_mem = 0, total_mem = 0;
    ggml_backend_rpc_get_device_memory(endpoint, 0, &free_mem, &total_mem);
    printf("llama_rpc_check: backend %s, server device memory %zu MiB\n", ggml_backend_name(backend),
           total_mem >> 20);

    ggml_init_params params = {
        /* .mem_size   = */ 16 * ggml_tensor_overhead() + ggml_graph_overhead(),
        /* .mem_buffer = */ nullptr,
        /* .no_alloc   = */ true,
    };
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, M);
    ggml_tensor * blob = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, BLOB_WORDS);
    ggml_tensor * y = ggml_add(ctx, ggml_mul_mat(ctx, w, x), b);  // ne = [M, N]
    ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, y);

    // every tensor of the context, the graph's results too, in one buffer on the server
    ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend);
    if (!buffer) {
        fprintf(stderr, "llama_rpc_check: no buffer on the server\n");
        return 1;
    }

    std::vector<float> wd(K * M), xd(K * N), bd(M), yd(M * N);
    std::vector<int32_t> blob_out(BLOB_WORDS), blob_in(BLOB_WORDS);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++) {
            wd[m * K + k] = w_at(m, k);
        }
        bd[m] = b_at(m);
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) {
            xd[n * K + k] = x_at(n, k);
        }
    }
    for (int64_t i = 0; i < BLOB_WORDS; i++) {
        blob_out[i] = blob_at(i);
    }
    ggml_backend_tensor_set(w, wd.data(), 0, ggml_nbytes(w));
    ggml_backend_tensor_set(x, xd.data(), 0, ggml_nbytes(x));
    ggml_backend_tensor_set(b, bd.data(), 0, ggml_nbytes(b));
    ggml_backend_tensor_set(blob, blob_out.data(), 0, ggml_nbytes(blob));

    if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "llama_rpc_check: graph compute failed on the server\n");
        return 1;
    }
    ggml_backend_tensor_get(y, yd.data(), 0, ggml_nbytes(y));
    ggml_backend_tensor_get(blob, blob_in.data(), 0, ggml_nbytes(blob));

    int64_t wrong = 0;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t m = 0; m < M; m++) {
            int64_t want = (int64_t)b_at(m);
            for (int64_t k = 0; k < K; k++) {
                want += (int64_t)w_at(m, k) * (int64_t)x_at(n, k);
            }
            float got = yd[n * M + m];
            if (got != (float)want) {
                if (wrong < 5) {
                    fprintf(stderr, "llama_rpc_check: Y[%" PRId64 ",%" PRId64 "] = %g, want %" PRId64 "\n",
                            n, m, got, want);
                }
                wrong++;
            }
        }
    }
    printf("llama_rpc_check: Y = W X + b, W %" PRId64 "x%" PRId64 ", X %" PRId64 "x%" PRId64
           ": %s (%" PRId64 " wrong of %" PRId64 ")\n", M, K, N, K, wrong ? "WRONG" : "OK", wrong, M * N);

    int64_t blob_wrong = 0;
    for (int64_t i = 0; i < BLOB_WORDS; i++) {
        blob_wrong += blob_in[i] != blob_out[i];
    }
    printf("llama_rpc_check: blob of %zu bytes there and back: %s (%" PRId64 " wrong words)\n",
           ggml_nbytes(blob), blob_wrong ? "WRONG" : "OK", blob_wrong);

    ggml_backend_buffer_free(buffer);
    ggml_free(ctx);
    ggml_backend_free(backend);
    if (wrong || blob_wrong) {
        return 1;
    }
    printf("llama_rpc_check: OK\n");
    return 0;
}
