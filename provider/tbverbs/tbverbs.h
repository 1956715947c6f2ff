/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rdma-core provider for thunderbolt_ibverbs (RDMA over USB4/Thunderbolt).
 *
 * Built inside an rdma-core tree by scripts/build-rdma-core.sh; this directory
 * is copied to providers/tbverbs/ there.
 */
#ifndef TBVERBS_H
#define TBVERBS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>

/*
 * The shared ABI header (single source: include/uapi/tbverbs-abi.h in the
 * tbverbs repo) and the "_STRUCT_<name>" wrappers that CMakeLists.txt
 * generates from it with rdma-core's buildlib/make_abi_structs.py, as
 * rdma-core does for the in-tree providers' kernel headers.
 */
#include <tbverbs-abi.h>
#include <kernel-abi/tbverbs-abi.h>

/*
 * Command/response wrappers: core uverbs struct followed by our driver-private
 * part. Add one line per verb that carries driver data. Only GET_CONTEXT does
 * today: the CQ/QP/SRQ/MR/AH verbs send libibverbs' plain command structs
 * (struct ibv_create_cq, struct ib_uverbs_create_cq_resp, ...) with no
 * driver-private part, so the kernel sees empty udata for them.
 */
DECLARE_DRV_CMD(tbverbs_cmd_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT,
		empty, tbverbs_alloc_ucontext_resp);

struct tbverbs_device {
	struct verbs_device ibv_dev;
};

struct tbverbs_context {
	struct verbs_context ibv_ctx;
};

/*
 * Per-object wrappers. The CQ (the ibv_cq_ex batch, below) and the QP (the
 * ibv_wr_* batch, below) hold provider state; the others exist so that state
 * can be added without touching every verb, and so that each object is the
 * size libibverbs expects: ibv_qp_to_qp_ex() reads verbs_qp.comp_mask from
 * any QP, so a QP must be a struct verbs_qp, not a bare struct ibv_qp; a CQ
 * from ibv_create_cq_ex() is a whole struct ibv_cq_ex (verbs_cq).
 */

enum {
	/* Completions per ibv_cmd_poll_cq() of the ibv_cq_ex iterator. */
	TBVERBS_CQ_BATCH = 16,
};

/*
 * A CQ. One from ibv_create_cq_ex() (batched) is also polled with the
 * ibv_cq_ex iterator, which polls the kernel TBVERBS_CQ_BATCH completions at
 * a time into buf[] and serves them from there one by one; ibv_poll_cq()
 * takes from buf[] first too. Unused by a CQ from ibv_create_cq().
 */
struct tbverbs_cq {
	struct verbs_cq vcq;
	bool batched;			/* from create_cq_ex; set at create */
	pthread_mutex_t lock;		/* buf, head, count (batched CQs) */
	uint32_t head;			/* oldest completion in buf[] */
	uint32_t count;			/* completions in buf[] from head */
	struct ibv_wc buf[TBVERBS_CQ_BATCH];
	struct ibv_wc cur;		/* the iterator's current completion */
};

struct tbverbs_mr {
	struct verbs_mr vmr;
};

/*
 * The work-request API (ibv_wr_start() .. ibv_wr_complete()) of a QP created
 * by ibv_create_qp_ex() with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS. The ibv_wr_*
 * calls between wr_start and wr_complete append plain struct ibv_send_wr
 * entries to wrs[], which wr_complete hands to ibv_cmd_post_send() in one
 * chain. All of it is allocated at create time from the capabilities the
 * kernel granted; none of it is used by a QP from ibv_create_qp().
 */
struct tbverbs_qp_wr {
	pthread_mutex_t lock;		/* held from wr_start to wr_complete/abort */
	struct ibv_send_wr *wrs;	/* max_wr entries */
	struct ibv_sge *sges;		/* sge_per_wr per entry of wrs[] */
	uint8_t *inline_buf;		/* max_inline bytes per entry of wrs[] */
	uint32_t max_wr;		/* cap.max_send_wr */
	uint32_t max_sge;		/* cap.max_send_sge */
	uint32_t sge_per_wr;		/* max(max_sge, 1): inline data uses one */
	uint32_t max_inline;		/* cap.max_inline_data */
	uint32_t nwr;			/* entries of wrs[] used by this batch */
	int err;			/* first error of this batch, or 0 */
};

struct tbverbs_qp {
	struct verbs_qp vqp;
	bool has_wr_api;		/* wr is set up (VERBS_QP_EX) */
	struct tbverbs_qp_wr wr;
};

struct tbverbs_srq {
	struct verbs_srq vsrq;
};

struct tbverbs_ah {
	struct ibv_ah ibv_ah;
};

static inline struct tbverbs_device *to_tdev(struct ibv_device *ibdev)
{
	return container_of(ibdev, struct tbverbs_device, ibv_dev.device);
}

static inline struct tbverbs_context *to_tctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct tbverbs_context, ibv_ctx.context);
}

static inline struct tbverbs_cq *to_tcq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct tbverbs_cq, vcq.cq);
}

static inline struct tbverbs_cq *cqx_to_tcq(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct tbverbs_cq, vcq.cq_ex);
}

static inline struct tbverbs_mr *to_tmr(struct verbs_mr *vmr)
{
	return container_of(vmr, struct tbverbs_mr, vmr);
}

static inline struct tbverbs_qp *to_tqp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct tbverbs_qp, vqp.qp);
}

static inline struct tbverbs_qp *qpx_to_tqp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct tbverbs_qp, vqp.qp_ex);
}

static inline struct tbverbs_srq *to_tsrq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct tbverbs_srq, vsrq.srq);
}

static inline struct tbverbs_ah *to_tah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct tbverbs_ah, ibv_ah);
}

/* send.c: post_send (generic command or the driver's method), memory windows */
int tbverbs_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
struct ibv_mw *tbverbs_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int tbverbs_dealloc_mw(struct ibv_mw *mw);
int tbverbs_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);

#endif /* TBVERBS_H */
