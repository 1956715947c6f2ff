// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rdma-core provider for thunderbolt_ibverbs: RDMA (RoCE v2 link layer) devices
 * usb4_rdmaN exposed by the kernel module over USB4/Thunderbolt cables.
 *
 * The kernel module implements every verb itself, the data path included: the
 * provider maps no queues or doorbells (no mmap) and routes each verb,
 * post_send/post_recv/post_srq_recv and poll_cq/req_notify_cq among them,
 * through libibverbs' generic uverbs command helpers (ibv_cmd_*, rdma-core's
 * libibverbs/driver.h). Apart from the ABI version in the GET_CONTEXT response,
 * no driver-private data is exchanged: the object verbs use libibverbs' plain
 * command and response structs. The one exception is send.c: a send list with a
 * memory-window bind, a local invalidation, a FLUSH or an atomic write goes
 * through the driver's own uverbs method (TBVERBS_METHOD_POST_SEND), as the
 * generic command cannot carry those.
 *
 * What the provider adds in user space is API, over those same commands: the
 * ibv_cq_ex iterator of ibv_create_cq_ex() CQs (ibv_start_poll() ..
 * ibv_end_poll(), served from batches of ibv_cmd_poll_cq()), and the
 * work-request API of ibv_create_qp_ex() QPs (ibv_wr_start() ..
 * ibv_wr_complete(), atomics and window binds included, posted as ibv_send_wr
 * chains through tbverbs_post_send()).
 *
 * Layout: one section per object type (device/port, PD, CQ, MR, QP, SRQ, AH),
 * the verbs_context_ops table, context and device lifetime, and the match
 * table. Everything goes through the kernel's uverbs commands; there is no fast
 * path in user space yet.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbverbs.h"

/* ---- Device and port ---- */

static int tbverbs_query_device_ex(struct ibv_context *context,
				   const struct ibv_query_device_ex_input *input,
				   struct ibv_device_attr_ex *attr,
				   size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	unsigned int major, minor, sub_minor;
	uint64_t raw_fw_ver;
	int ret;

	ret = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	/* fw_ver is 0xMMMMmmmmssss as in siw: major.minor.sub_minor */
	raw_fw_ver = resp.base.fw_ver;
	major = (raw_fw_ver >> 32) & 0xffff;
	minor = (raw_fw_ver >> 16) & 0xffff;
	sub_minor = raw_fw_ver & 0xffff;

	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", major, minor, sub_minor);

	return 0;
}

static int tbverbs_query_port(struct ibv_context *context, uint8_t port,
			      struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

/* ---- Protection domains ---- */

static struct ibv_pd *tbverbs_alloc_pd(struct ibv_context *context)
{
	struct ib_uverbs_alloc_pd_resp resp = {};
	struct ibv_alloc_pd cmd = {};
	struct ibv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;

	ret = ibv_cmd_alloc_pd(context, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}

	return pd;
}

static int tbverbs_dealloc_pd(struct ibv_pd *pd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(pd);
	if (ret)
		return ret;

	free(pd);
	return 0;
}

/*
 * Error conventions, as in rdma-core's own providers: verbs returning a
 * pointer return NULL with errno set; verbs returning an int return an errno
 * value. A destroy that the kernel refuses leaves the object allocated, so the
 * caller can retry.
 */

/*
 * ---- Completion queues ----
 *
 * Every completion comes from the kernel's CQ through the uverbs poll command
 * (ibv_cmd_poll_cq()); req_notify_cq is libibverbs' ibv_cmd_req_notify_cq()
 * itself (see the ops table). poll_cq returns the number of completions or
 * -1, as ibv_poll_cq() specifies. A CQ from ibv_create_cq() is polled by
 * ibv_cmd_poll_cq() alone.
 *
 * A CQ from ibv_create_cq_ex() is the same kernel object; in user space it
 * also has the ibv_cq_ex iterator (ibv_start_poll(), ibv_next_poll(),
 * ibv_end_poll() and the ibv_wc_read_*() readers). The iterator polls the
 * kernel for up to TBVERBS_CQ_BATCH completions at a time into the CQ's
 * buffer (struct tbverbs_cq) and serves them from there one by one: each is
 * copied to cq->cur, which the readers read, and its wr_id and status to the
 * struct ibv_cq_ex. The buffer holds completions that the kernel has handed
 * out and nobody has consumed, older than any still in the kernel, so every
 * consumer takes from it first: the iterator refills it only when it is
 * empty, and poll_cq on such a CQ drains it before it polls the kernel for
 * the rest. cq->lock guards the buffer for the length of one call, never
 * from start_poll to end_poll: ibv_poll_cq() from another thread, or from
 * the polling thread itself inside a start_poll .. end_poll bracket, takes
 * the completions not yet served to the bracket and cannot deadlock with it.
 * The bracket itself is single-threaded per CQ (the ibv_cq_ex contract), and
 * cq->cur belongs to it.
 *
 * A completion is consumed when it is served, so end_poll has nothing to do;
 * that also makes an end_poll after a failed start_poll, which the contract
 * forbids, harmless. start_poll and next_poll return ENOENT when neither the
 * buffer nor the kernel holds a completion (the kernel is asked again on
 * every call), EINVAL for a start_poll with attr->comp_mask set, or the
 * errno of a failed poll command.
 *
 * Completions in the buffer have left the kernel's CQ: they no longer count
 * towards its overrun or towards what resize_cq has to keep, and they raised
 * their completion event, if any, when they reached the kernel. As with any
 * CQ, a consumer arms the CQ and then polls once more before it waits for
 * an event.
 *
 * ibv_create_cq_ex() accepts what a struct ibv_wc can answer: wc_flags within
 * IBV_WC_STANDARD_FLAGS (byte_len, imm_data/invalidated rkey, qp_num,
 * src_qp, slid, sl, dlid_path_bits), whose readers it sets; opcode,
 * vendor_err and wc_flags can always be read. Any other wc_flags bit fails
 * with EOPNOTSUPP: the completion timestamps (no device clock), CVLAN, flow
 * tag and tag matching (not in a uverbs completion). comp_mask may hold
 * IBV_CQ_INIT_ATTR_MASK_FLAGS with IBV_CREATE_CQ_ATTR_SINGLE_THREADED, a hint
 * (the locking stays); IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN (the kernel's
 * overrun is an error), IBV_CQ_INIT_ATTR_MASK_PD (no parent domains) and
 * unknown bits fail with EOPNOTSUPP.
 */

enum {
	TBVERBS_CQ_INIT_ATTR_SUP = IBV_CQ_INIT_ATTR_MASK_FLAGS,
	TBVERBS_CREATE_CQ_FLAGS_SUP = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	TBVERBS_CQ_WC_FLAGS_SUP = IBV_WC_STANDARD_FLAGS,
};

static struct tbverbs_cq *tbverbs_cq_alloc(void)
{
	struct tbverbs_cq *cq;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	pthread_mutex_init(&cq->lock, NULL);
	return cq;
}

static void tbverbs_cq_free(struct tbverbs_cq *cq)
{
	pthread_mutex_destroy(&cq->lock);
	free(cq);
}

static struct ibv_cq *tbverbs_create_cq(struct ibv_context *context, int cqe,
					struct ibv_comp_channel *channel,
					int comp_vector)
{
	struct ib_uverbs_create_cq_resp resp = {};
	struct ibv_create_cq cmd = {};
	struct tbverbs_cq *cq;
	int ret;

	cq = tbverbs_cq_alloc();
	if (!cq)
		return NULL;

	ret = ibv_cmd_create_cq(context, cqe, channel, comp_vector, &cq->vcq.cq,
				&cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		tbverbs_cq_free(cq);
		errno = ret;
		return NULL;
	}

	return &cq->vcq.cq;
}

static int tbverbs_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct tbverbs_cq *cq = to_tcq(ibcq);
	int n = 0, ret;

	if (!cq->batched)
		return ibv_cmd_poll_cq(ibcq, ne, wc);

	pthread_mutex_lock(&cq->lock);
	while (n < ne && cq->count) {
		wc[n++] = cq->buf[cq->head++];
		cq->count--;
	}
	if (n < ne) {
		/* The buffer is empty: the rest comes from the kernel. */
		ret = ibv_cmd_poll_cq(ibcq, ne - n, wc + n);
		if (ret >= 0)
			n += ret;
		else if (!n)
			n = -1;	/* else the error shows on the next call */
	}
	pthread_mutex_unlock(&cq->lock);

	return n;
}

/*
 * Serve the oldest completion, refilling the buffer from the kernel if it is
 * empty; 0, ENOENT if there is none, or an errno value.
 */
static int tbverbs_cq_serve(struct tbverbs_cq *cq)
{
	int n, ret = 0;

	pthread_mutex_lock(&cq->lock);
	if (!cq->count) {
		n = ibv_cmd_poll_cq(&cq->vcq.cq, TBVERBS_CQ_BATCH, cq->buf);
		if (n < 0) {
			ret = errno ? errno : EIO;
			goto out;
		}
		cq->head = 0;
		cq->count = n;
		if (!n) {
			ret = ENOENT;
			goto out;
		}
	}

	cq->cur = cq->buf[cq->head++];
	cq->count--;
	cq->vcq.cq_ex.wr_id = cq->cur.wr_id;
	cq->vcq.cq_ex.status = cq->cur.status;
out:
	pthread_mutex_unlock(&cq->lock);
	return ret;
}

static int tbverbs_start_poll(struct ibv_cq_ex *cqx,
			      struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;

	return tbverbs_cq_serve(cqx_to_tcq(cqx));
}

static int tbverbs_next_poll(struct ibv_cq_ex *cqx)
{
	return tbverbs_cq_serve(cqx_to_tcq(cqx));
}

static void tbverbs_end_poll(struct ibv_cq_ex *cqx)
{
	/* Served completions are consumed already; the lock is not held. */
}

static enum ibv_wc_opcode tbverbs_wc_read_opcode(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.opcode;
}

static uint32_t tbverbs_wc_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.vendor_err;
}

static uint32_t tbverbs_wc_read_byte_len(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.byte_len;
}

/* Also ibv_wc_read_invalidated_rkey(): the same union in struct ibv_wc. */
static __be32 tbverbs_wc_read_imm_data(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.imm_data;
}

static uint32_t tbverbs_wc_read_qp_num(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.qp_num;
}

static uint32_t tbverbs_wc_read_src_qp(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.src_qp;
}

static unsigned int tbverbs_wc_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.wc_flags;
}

static uint32_t tbverbs_wc_read_slid(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.slid;
}

static uint8_t tbverbs_wc_read_sl(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.sl;
}

static uint8_t tbverbs_wc_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return cqx_to_tcq(cqx)->cur.dlid_path_bits;
}

/* 0 if the provider supports the request, else an errno value. */
static int tbverbs_check_cq_init_attr_ex(const struct ibv_cq_init_attr_ex *attr)
{
	if (!check_comp_mask(attr->comp_mask, TBVERBS_CQ_INIT_ATTR_SUP))
		return EOPNOTSUPP;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    !check_comp_mask(attr->flags, TBVERBS_CREATE_CQ_FLAGS_SUP))
		return EOPNOTSUPP;
	if (!check_comp_mask(attr->wc_flags, TBVERBS_CQ_WC_FLAGS_SUP))
		return EOPNOTSUPP;

	return 0;
}

static struct ibv_cq_ex *tbverbs_create_cq_ex(struct ibv_context *context,
					      struct ibv_cq_init_attr_ex *attr)
{
	struct ib_uverbs_ex_create_cq_resp resp = {};
	struct ibv_create_cq_ex cmd = {};
	struct tbverbs_cq *cq;
	struct ibv_cq_ex *cqx;
	int ret;

	ret = tbverbs_check_cq_init_attr_ex(attr);
	if (ret) {
		errno = ret;
		return NULL;
	}

	cq = tbverbs_cq_alloc();
	if (!cq)
		return NULL;

	/*
	 * No flag the kernel would see is left (ibv_cmd_create_cq_ex() sends
	 * only the timestamp and IGNORE_OVERRUN ones), so this is the same
	 * command as create_cq's.
	 */
	ret = ibv_cmd_create_cq_ex(context, attr, NULL, &cq->vcq, &cmd,
				   sizeof(cmd), &resp, sizeof(resp), 0);
	if (ret) {
		tbverbs_cq_free(cq);
		errno = ret;
		return NULL;
	}

	cq->batched = true;
	cqx = &cq->vcq.cq_ex;
	cqx->start_poll = tbverbs_start_poll;
	cqx->next_poll = tbverbs_next_poll;
	cqx->end_poll = tbverbs_end_poll;
	cqx->read_opcode = tbverbs_wc_read_opcode;
	cqx->read_vendor_err = tbverbs_wc_read_vendor_err;
	cqx->read_wc_flags = tbverbs_wc_read_wc_flags;
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = tbverbs_wc_read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = tbverbs_wc_read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = tbverbs_wc_read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = tbverbs_wc_read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = tbverbs_wc_read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = tbverbs_wc_read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = tbverbs_wc_read_dlid_path_bits;

	return cqx;
}

/*
 * Any CQ, one from create_cq_ex included (ibv_cq_ex_to_cq() is a cast):
 * completions still in its buffer go with it, as the kernel's own do.
 */
static int tbverbs_destroy_cq(struct ibv_cq *ibcq)
{
	struct tbverbs_cq *cq = to_tcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;

	tbverbs_cq_free(cq);
	return 0;
}

/*
 * The kernel keeps the waiting completions, in order; it refuses to drop any.
 * A batched CQ's buffer is not the kernel's and stays as it is.
 */
static int tbverbs_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct ib_uverbs_resize_cq_resp resp = {};
	struct ibv_resize_cq cmd = {};

	return ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp, sizeof(resp));
}

/* ---- Memory regions ---- */

static struct ibv_mr *tbverbs_reg_mr(struct ibv_pd *pd, void *addr,
				     size_t length, uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp = {};
	struct ibv_reg_mr cmd = {};
	struct tbverbs_mr *mr;
	int ret;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;

	/*
	 * access goes to the kernel as given, optional flags such as
	 * IBV_ACCESS_RELAXED_ORDERING included: the kernel ignores the
	 * optional range (libibverbs already clears it when the kernel does
	 * not report IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS).
	 */
	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, &mr->vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}

	return &mr->vmr.ibv_mr;
}

/* New PD or rights in place; a new translation gets new keys (libibverbs updates the MR). */
static int tbverbs_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
			    size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;

	return ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr, access, pd, &cmd,
				sizeof(cmd), &resp, sizeof(resp));
}

static int tbverbs_dereg_mr(struct verbs_mr *vmr)
{
	struct tbverbs_mr *mr = to_tmr(vmr);
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;

	free(mr);
	return 0;
}

/*
 * ---- Queue pairs ----
 *
 * create_qp serves ibv_create_qp(), and ibv_create_qp_ex() with comp_mask
 * IBV_QP_INIT_ATTR_PD alone, which libibverbs routes to it; create_qp_ex
 * (below) serves the rest of ibv_create_qp_ex(). post_send and post_recv are
 * libibverbs' ibv_cmd_post_send() and ibv_cmd_post_recv() themselves (see the
 * ops table). ibv_cmd_post_send() copies no inline data: an IBV_SEND_INLINE
 * work request reaches the kernel as its plain SGEs, user addresses and all,
 * and the kernel copies the data from there while it posts.
 */

static struct ibv_qp *tbverbs_create_qp(struct ibv_pd *pd,
					struct ibv_qp_init_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_create_qp cmd = {};
	struct tbverbs_qp *qp;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;

	/* Writes the capabilities the kernel granted back to attr->cap. */
	ret = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd), &resp,
				sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}

	return &qp->vqp.qp;
}

/*
 * ---- Queue pairs: the work-request API (ibv_wr_*) ----
 *
 * No send queue is mapped in user space, so the ibv_wr_* calls build the
 * same chain of struct ibv_send_wr that ibv_post_send() takes, in arrays the
 * QP owns (struct tbverbs_qp_wr), and wr_complete posts the whole batch
 * through ibv_cmd_post_send(). A batch holds up to cap.max_send_wr work
 * requests; the setters (wr_set_*) apply to the batch's last one.
 *
 * An error inside a batch is remembered, the rest of the batch is ignored,
 * and wr_complete returns that errno without posting anything, as rxe does:
 * ENOMEM when the batch is full, EINVAL for too many SGEs, inline data over
 * cap.max_inline_data, a setter with no work request to apply to, a UD
 * address on a non-UD QP or a UD work request without one. These are the
 * errnos the kernel's post_send gives for a full send queue and for a bad
 * work request.
 *
 * Inline data is copied at the wr_set_inline_data*() call into the work
 * request's own slot of inline_buf (cap.max_inline_data bytes each) and
 * reaches the kernel as one SGE pointing there, with IBV_SEND_INLINE. The
 * kernel copies inline data from the SGEs' addresses while it posts, which is
 * before ibv_cmd_post_send(), and so wr_complete, returns. IBV_SEND_INLINE in
 * wr_flags is ignored: whether a work request is inline is decided by which
 * setter gives its data, as in mlx5 (perftest sets both).
 *
 * Once posting has started, a work request the kernel refuses (a full send
 * queue, say) fails wr_complete with the kernel's errno, but the work
 * requests before it in the batch stay posted: the kernel posts them one at a
 * time, not all or nothing.
 */

enum {
	/*
	 * Work requests per ibv_cmd_post_send(): it builds its command on the
	 * stack (alloca), 56 bytes per work request plus 16 per SGE.
	 */
	TBVERBS_POST_CHUNK = 128,
};

/* Append a work request to the batch; NULL if the batch has failed. */
static struct ibv_send_wr *tbverbs_wr_new(struct ibv_qp_ex *qpx,
					  enum ibv_wr_opcode opcode)
{
	struct tbverbs_qp_wr *b = &qpx_to_tqp(qpx)->wr;
	struct ibv_send_wr *wr;

	if (b->err)
		return NULL;
	if (b->nwr == b->max_wr) {
		b->err = ENOMEM;
		return NULL;
	}

	wr = &b->wrs[b->nwr];
	*wr = (struct ibv_send_wr){
		.wr_id = qpx->wr_id,
		.sg_list = &b->sges[(size_t)b->nwr * b->sge_per_wr],
		.opcode = opcode,
		.send_flags = qpx->wr_flags & ~IBV_SEND_INLINE,
	};
	b->nwr++;

	return wr;
}

/* The work request a setter applies to; NULL if the batch has failed. */
static struct ibv_send_wr *tbverbs_wr_cur(struct ibv_qp_ex *qpx)
{
	struct tbverbs_qp_wr *b = &qpx_to_tqp(qpx)->wr;

	if (b->err)
		return NULL;
	if (!b->nwr) {
		b->err = EINVAL;
		return NULL;
	}

	return &b->wrs[b->nwr - 1];
}

static void tbverbs_wr_send(struct ibv_qp_ex *qpx)
{
	tbverbs_wr_new(qpx, IBV_WR_SEND);
}

static void tbverbs_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct ibv_send_wr *wr = tbverbs_wr_new(qpx, IBV_WR_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm_data;
}

static void tbverbs_wr_rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
			    uint32_t rkey, uint64_t remote_addr,
			    __be32 imm_data)
{
	struct ibv_send_wr *wr = tbverbs_wr_new(qpx, opcode);

	if (!wr)
		return;

	wr->wr.rdma.remote_addr = remote_addr;
	wr->wr.rdma.rkey = rkey;
	wr->imm_data = imm_data;
}

static void tbverbs_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				  uint64_t remote_addr)
{
	tbverbs_wr_rdma(qpx, IBV_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

static void tbverbs_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				      uint64_t remote_addr, __be32 imm_data)
{
	tbverbs_wr_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr,
			imm_data);
}

static void tbverbs_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
				 uint64_t remote_addr)
{
	tbverbs_wr_rdma(qpx, IBV_WR_RDMA_READ, rkey, remote_addr, 0);
}

/*
 * Atomics: 8 bytes at remote_addr; the original value lands in the work
 * request's one SGE of 8 bytes (wr_set_sge), which the kernel checks.
 */
static void tbverbs_wr_atomic(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
			      uint32_t rkey, uint64_t remote_addr,
			      uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr *wr = tbverbs_wr_new(qpx, opcode);

	if (!wr)
		return;

	wr->wr.atomic.remote_addr = remote_addr;
	wr->wr.atomic.compare_add = compare_add;
	wr->wr.atomic.swap = swap;
	wr->wr.atomic.rkey = rkey;
}

static void tbverbs_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				      uint64_t remote_addr, uint64_t compare,
				      uint64_t swap)
{
	tbverbs_wr_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr,
			  compare, swap);
}

static void tbverbs_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
					uint64_t remote_addr, uint64_t add)
{
	tbverbs_wr_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr,
			  add, 0);
}

/*
 * FLUSH and atomic write (RC): posted through the driver's method. struct
 * ibv_send_wr has no FLUSH fields, so this provider-private entry keeps the
 * length in imm_data and type | level << 8 in the unused XRC field (send.c
 * reads them back); the atomic write's 8 bytes ride in wr.atomic.compare_add.
 */
static void tbverbs_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			     size_t len, uint8_t type, uint8_t level)
{
	struct ibv_send_wr *wr = tbverbs_wr_new(qpx, IBV_WR_FLUSH);

	if (!wr)
		return;
	if (len > UINT32_MAX) {
		qpx_to_tqp(qpx)->wr.err = EINVAL;
		return;
	}
	wr->wr.rdma.remote_addr = remote_addr;
	wr->wr.rdma.rkey = rkey;
	wr->imm_data = (uint32_t)len;
	wr->qp_type.xrc.remote_srqn = type | (uint32_t)level << 8;
}

static void tbverbs_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				    const void *atomic_wr)
{
	struct ibv_send_wr *wr = tbverbs_wr_new(qpx, IBV_WR_ATOMIC_WRITE);

	if (!wr)
		return;
	wr->wr.atomic.remote_addr = remote_addr;
	wr->wr.atomic.rkey = rkey;
	memcpy(&wr->wr.atomic.compare_add, atomic_wr, sizeof(wr->wr.atomic.compare_add));
}

/* Memory windows and invalidation (RC and UC): posted through the driver's method. */
static void tbverbs_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
			       const struct ibv_mw_bind_info *bind_info)
{
	struct ibv_send_wr *wr = tbverbs_wr_new(qpx, IBV_WR_BIND_MW);

	if (!wr)
		return;
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	wr->bind_mw.bind_info = *bind_info;
}

static void tbverbs_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = tbverbs_wr_new(qpx, IBV_WR_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void tbverbs_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = tbverbs_wr_new(qpx, IBV_WR_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void tbverbs_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
				   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct ibv_send_wr *wr = tbverbs_wr_cur(qpx);

	if (!wr)
		return;
	/* wr.ud shares a union with wr.rdma: never write it on an RC/UC QP. */
	if (qpx->qp_base.qp_type != IBV_QPT_UD || !ah) {
		qpx_to_tqp(qpx)->wr.err = EINVAL;
		return;
	}

	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = remote_qpn;
	wr->wr.ud.remote_qkey = remote_qkey;
}

static void tbverbs_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				    const struct ibv_sge *sg_list)
{
	struct tbverbs_qp_wr *b = &qpx_to_tqp(qpx)->wr;
	struct ibv_send_wr *wr = tbverbs_wr_cur(qpx);

	if (!wr)
		return;
	if (num_sge > b->max_sge) {
		b->err = EINVAL;
		return;
	}

	if (num_sge)
		memcpy(wr->sg_list, sg_list, num_sge * sizeof(*sg_list));
	wr->num_sge = num_sge;
	wr->send_flags &= ~IBV_SEND_INLINE;
}

static void tbverbs_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey,
			       uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = {
		.addr = addr,
		.length = length,
		.lkey = lkey,
	};

	/* A zero-length buffer is no SGE at all, as in rxe and mlx5. */
	tbverbs_wr_set_sge_list(qpx, length ? 1 : 0, &sge);
}

static void tbverbs_wr_set_inline_data_list(struct ibv_qp_ex *qpx,
					    size_t num_buf,
					    const struct ibv_data_buf *buf_list)
{
	struct tbverbs_qp_wr *b = &qpx_to_tqp(qpx)->wr;
	struct ibv_send_wr *wr = tbverbs_wr_cur(qpx);
	size_t total = 0, i;
	uint8_t *data, *p;

	if (!wr)
		return;
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length > b->max_inline - total) {
			b->err = EINVAL;
			return;
		}
		total += buf_list[i].length;
	}

	wr->num_sge = 0;
	wr->send_flags |= IBV_SEND_INLINE;
	if (!total)
		return;

	data = b->inline_buf + (size_t)(wr - b->wrs) * b->max_inline;
	for (i = 0, p = data; i < num_buf; i++) {
		memcpy(p, buf_list[i].addr, buf_list[i].length);
		p += buf_list[i].length;
	}

	/* The kernel ignores the lkey of inline data. */
	wr->sg_list[0] = (struct ibv_sge){
		.addr = (uintptr_t)data,
		.length = total,
	};
	wr->num_sge = 1;
}

static void tbverbs_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				       size_t length)
{
	struct ibv_data_buf buf = {
		.addr = addr,
		.length = length,
	};

	tbverbs_wr_set_inline_data_list(qpx, 1, &buf);
}

static void tbverbs_wr_start(struct ibv_qp_ex *qpx)
{
	struct tbverbs_qp_wr *b = &qpx_to_tqp(qpx)->wr;

	pthread_mutex_lock(&b->lock);
	b->nwr = 0;
	b->err = 0;
}

/* Post the batch; an errno value, 0 when all of it was posted. */
static int tbverbs_wr_post(struct tbverbs_qp *qp)
{
	struct tbverbs_qp_wr *b = &qp->wr;
	struct ibv_send_wr *bad_wr;
	uint32_t i, j, n;
	int ret;

	if (b->err)
		return b->err;

	/* ibv_cmd_post_send() dereferences the AH of every UD work request. */
	if (qp->vqp.qp.qp_type == IBV_QPT_UD)
		for (i = 0; i < b->nwr; i++)
			if (!b->wrs[i].wr.ud.ah)
				return EINVAL;

	for (i = 0; i < b->nwr; i += n) {
		n = b->nwr - i;
		if (n > TBVERBS_POST_CHUNK)
			n = TBVERBS_POST_CHUNK;
		for (j = i; j < i + n - 1; j++)
			b->wrs[j].next = &b->wrs[j + 1];
		b->wrs[i + n - 1].next = NULL;

		ret = tbverbs_post_send(&qp->vqp.qp, &b->wrs[i], &bad_wr);
		if (ret)
			return ret;
	}

	return 0;
}

static int tbverbs_wr_complete(struct ibv_qp_ex *qpx)
{
	struct tbverbs_qp *qp = qpx_to_tqp(qpx);
	int ret;

	ret = tbverbs_wr_post(qp);
	qp->wr.nwr = 0;
	qp->wr.err = 0;
	pthread_mutex_unlock(&qp->wr.lock);

	return ret;
}

static void tbverbs_wr_abort(struct ibv_qp_ex *qpx)
{
	struct tbverbs_qp_wr *b = &qpx_to_tqp(qpx)->wr;

	b->nwr = 0;
	b->err = 0;
	pthread_mutex_unlock(&b->lock);
}

static void tbverbs_qp_wr_free(struct tbverbs_qp_wr *b)
{
	free(b->inline_buf);
	free(b->sges);
	free(b->wrs);
}

/*
 * Set up the work-request API of a QP that the kernel has created with
 * capabilities *cap; an errno value.
 */
static int tbverbs_qp_wr_init(struct tbverbs_qp *qp,
			      const struct ibv_qp_cap *cap,
			      uint64_t send_ops_flags)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct tbverbs_qp_wr *b = &qp->wr;
	size_t n;

	b->max_wr = cap->max_send_wr;
	b->max_sge = cap->max_send_sge;
	b->sge_per_wr = b->max_sge ? b->max_sge : 1;
	b->max_inline = cap->max_inline_data;

	/* At least one entry, so that a NULL from calloc() is a failure. */
	n = b->max_wr ? b->max_wr : 1;
	b->wrs = calloc(n, sizeof(*b->wrs));
	b->sges = calloc(n * b->sge_per_wr, sizeof(*b->sges));
	if (b->max_inline)
		b->inline_buf = calloc(n, b->max_inline);
	if (!b->wrs || !b->sges || (b->max_inline && !b->inline_buf)) {
		tbverbs_qp_wr_free(b);
		return ENOMEM;
	}
	pthread_mutex_init(&b->lock, NULL);

	if (send_ops_flags & IBV_QP_EX_WITH_SEND)
		qpx->wr_send = tbverbs_wr_send;
	if (send_ops_flags & IBV_QP_EX_WITH_SEND_WITH_IMM)
		qpx->wr_send_imm = tbverbs_wr_send_imm;
	if (send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE)
		qpx->wr_rdma_write = tbverbs_wr_rdma_write;
	if (send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		qpx->wr_rdma_write_imm = tbverbs_wr_rdma_write_imm;
	if (send_ops_flags & IBV_QP_EX_WITH_RDMA_READ)
		qpx->wr_rdma_read = tbverbs_wr_rdma_read;
	if (send_ops_flags & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		qpx->wr_atomic_cmp_swp = tbverbs_wr_atomic_cmp_swp;
	if (send_ops_flags & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		qpx->wr_atomic_fetch_add = tbverbs_wr_atomic_fetch_add;
	if (send_ops_flags & IBV_QP_EX_WITH_FLUSH)
		qpx->wr_flush = tbverbs_wr_flush;
	if (send_ops_flags & IBV_QP_EX_WITH_ATOMIC_WRITE)
		qpx->wr_atomic_write = tbverbs_wr_atomic_write;
	if (send_ops_flags & IBV_QP_EX_WITH_BIND_MW)
		qpx->wr_bind_mw = tbverbs_wr_bind_mw;
	if (send_ops_flags & IBV_QP_EX_WITH_LOCAL_INV)
		qpx->wr_local_inv = tbverbs_wr_local_inv;
	if (send_ops_flags & IBV_QP_EX_WITH_SEND_WITH_INV)
		qpx->wr_send_inv = tbverbs_wr_send_inv;

	qpx->wr_set_ud_addr = tbverbs_wr_set_ud_addr;
	qpx->wr_set_inline_data = tbverbs_wr_set_inline_data;
	qpx->wr_set_inline_data_list = tbverbs_wr_set_inline_data_list;
	qpx->wr_set_sge = tbverbs_wr_set_sge;
	qpx->wr_set_sge_list = tbverbs_wr_set_sge_list;

	qpx->wr_start = tbverbs_wr_start;
	qpx->wr_complete = tbverbs_wr_complete;
	qpx->wr_abort = tbverbs_wr_abort;

	/* ibv_qp_to_qp_ex() returns the QP's ibv_qp_ex only with this bit. */
	qp->vqp.comp_mask |= VERBS_QP_EX;
	qp->has_wr_api = true;

	return 0;
}

/*
 * ---- Queue pairs: ibv_create_qp_ex() ----
 *
 * libibverbs calls create_qp_ex for any comp_mask other than
 * IBV_QP_INIT_ATTR_PD alone. Accepted: IBV_QP_INIT_ATTR_PD,
 * IBV_QP_INIT_ATTR_CREATE_FLAGS with no flag set (rdma-core's tests pass
 * that), and IBV_QP_INIT_ATTR_SEND_OPS_FLAGS with the operations the kernel
 * implements for the QP type (send and send with immediate on UD; also RDMA
 * write and write with immediate, window binds, local invalidation and send
 * with invalidate on UC; also RDMA read, atomic compare and swap, atomic
 * fetch and add, atomic write and flush on RC). The atomics are accepted only
 * when the device reports an atomic_cap other than IBV_ATOMIC_NONE (a kernel
 * without atomics refuses them at post time). Anything else (XRC, TSO, ...) and
 * any QP type but RC, UC and UD fail with EOPNOTSUPP. The QP is the same
 * kernel object as one from create_qp; with SEND_OPS_FLAGS it also gets the
 * work-request API above.
 */

enum {
	TBVERBS_QP_INIT_ATTR_SUP = IBV_QP_INIT_ATTR_PD |
				   IBV_QP_INIT_ATTR_CREATE_FLAGS |
				   IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,

	TBVERBS_UD_SEND_OPS = IBV_QP_EX_WITH_SEND |
			      IBV_QP_EX_WITH_SEND_WITH_IMM,
	TBVERBS_UC_SEND_OPS = TBVERBS_UD_SEND_OPS |
			      IBV_QP_EX_WITH_RDMA_WRITE |
			      IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			      IBV_QP_EX_WITH_BIND_MW |
			      IBV_QP_EX_WITH_LOCAL_INV |
			      IBV_QP_EX_WITH_SEND_WITH_INV,
	TBVERBS_ATOMIC_SEND_OPS = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
	TBVERBS_RC_SEND_OPS = TBVERBS_UC_SEND_OPS |
			      IBV_QP_EX_WITH_RDMA_READ |
			      IBV_QP_EX_WITH_FLUSH |
			      IBV_QP_EX_WITH_ATOMIC_WRITE |
			      TBVERBS_ATOMIC_SEND_OPS,
};

/* Whether the device reports a capability bit (device_cap_flags_ex); no on an error. */
static bool tbverbs_device_has(struct ibv_context *context, uint64_t cap)
{
	struct ibv_device_attr_ex attr = {};

	return !ibv_query_device_ex(context, NULL, &attr) && (attr.device_cap_flags_ex & cap);
}

/* 0 if the provider supports the request, else an errno value. */
static int tbverbs_check_qp_init_attr_ex(struct ibv_context *context,
					 const struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_device_attr dev_attr;
	uint64_t send_ops;
	int ret;

	if (!check_comp_mask(attr->comp_mask, TBVERBS_QP_INIT_ATTR_SUP))
		return EOPNOTSUPP;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    attr->create_flags)
		return EOPNOTSUPP;

	switch (attr->qp_type) {
	case IBV_QPT_RC:
		send_ops = TBVERBS_RC_SEND_OPS;
		break;
	case IBV_QPT_UC:
		send_ops = TBVERBS_UC_SEND_OPS;
		break;
	case IBV_QPT_UD:
		send_ops = TBVERBS_UD_SEND_OPS;
		break;
	default:
		return EOPNOTSUPP;
	}

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return 0;
	if (!check_comp_mask(attr->send_ops_flags, send_ops))
		return EOPNOTSUPP;

	if (attr->send_ops_flags & TBVERBS_ATOMIC_SEND_OPS) {
		ret = ibv_query_device(context, &dev_attr);
		if (ret)
			return ret;
		if (dev_attr.atomic_cap == IBV_ATOMIC_NONE)
			return EOPNOTSUPP;
	}
	/* only where the device offers them: the kernel's verbs lack both before 6.2 */
	if (attr->send_ops_flags & IBV_QP_EX_WITH_FLUSH &&
	    !tbverbs_device_has(context, IB_UVERBS_DEVICE_FLUSH_GLOBAL))
		return EOPNOTSUPP;
	if (attr->send_ops_flags & IBV_QP_EX_WITH_ATOMIC_WRITE &&
	    !tbverbs_device_has(context, IB_UVERBS_DEVICE_ATOMIC_WRITE))
		return EOPNOTSUPP;

	return 0;
}

static struct ibv_qp *tbverbs_create_qp_ex(struct ibv_context *context,
					   struct ibv_qp_init_attr_ex *attr)
{
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_create_qp cmd = {};
	struct ibv_qp_init_attr_ex attr_ex;
	struct tbverbs_qp *qp;
	int ret;

	ret = tbverbs_check_qp_init_attr_ex(context, attr);
	if (ret) {
		errno = ret;
		return NULL;
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;

	/*
	 * ibv_cmd_create_qp_ex() refuses IBV_QP_INIT_ATTR_CREATE_FLAGS, which
	 * carries no flag here: drop it from a copy of attr. The copy gets
	 * the capabilities the kernel granted, which go back to attr->cap.
	 */
	attr_ex = *attr;
	attr_ex.comp_mask &= ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ret = ibv_cmd_create_qp_ex(context, &qp->vqp, &attr_ex, &cmd,
				   sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	attr->cap = attr_ex.cap;

	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ret = tbverbs_qp_wr_init(qp, &attr->cap, attr->send_ops_flags);
		if (ret)
			goto err_destroy;
	}

	return &qp->vqp.qp;

err_destroy:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
	free(qp);
	errno = ret;
	return NULL;
}

static int tbverbs_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			    int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd = {};

	return ibv_cmd_query_qp(ibqp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

static int tbverbs_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			     int attr_mask)
{
	struct ibv_modify_qp cmd = {};

	return ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
}

static int tbverbs_destroy_qp(struct ibv_qp *ibqp)
{
	struct tbverbs_qp *qp = to_tqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;

	if (qp->has_wr_api) {
		pthread_mutex_destroy(&qp->wr.lock);
		tbverbs_qp_wr_free(&qp->wr);
	}
	free(qp);
	return 0;
}

/*
 * ---- Shared receive queues ----
 *
 * Basic SRQs only (no create_srq_ex): ibv_create_srq_ex() for a basic SRQ
 * calls create_srq. post_srq_recv is libibverbs' ibv_cmd_post_srq_recv()
 * itself (see the ops table).
 */

static struct ibv_srq *tbverbs_create_srq(struct ibv_pd *pd,
					  struct ibv_srq_init_attr *attr)
{
	struct ib_uverbs_create_srq_resp resp = {};
	struct ibv_create_srq cmd = {};
	struct tbverbs_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;

	/* Writes the max_wr and max_sge the kernel granted back to attr->attr. */
	ret = ibv_cmd_create_srq(pd, &srq->vsrq.srq, attr, &cmd, sizeof(cmd),
				 &resp, sizeof(resp));
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}

	return &srq->vsrq.srq;
}

static int tbverbs_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
			      int attr_mask)
{
	struct ibv_modify_srq cmd = {};

	return ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int tbverbs_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd = {};

	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

static int tbverbs_destroy_srq(struct ibv_srq *ibsrq)
{
	struct tbverbs_srq *srq = to_tsrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;

	free(srq);
	return 0;
}

/* ---- Address handles ---- */

static struct ibv_ah *tbverbs_create_ah(struct ibv_pd *pd,
					struct ibv_ah_attr *attr)
{
	struct ib_uverbs_create_ah_resp resp = {};
	struct tbverbs_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;

	/*
	 * The kernel resolves the destination MAC and the source GID entry
	 * from attr (a RoCE AH needs is_global and a valid grh.sgid_index).
	 */
	ret = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp, sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}

	return &ah->ibv_ah;
}

static int tbverbs_destroy_ah(struct ibv_ah *ibah)
{
	struct tbverbs_ah *ah = to_tah(ibah);
	int ret;

	ret = ibv_cmd_destroy_ah(ibah);
	if (ret)
		return ret;

	free(ah);
	return 0;
}

/* ---- Context ---- */

static void tbverbs_free_context(struct ibv_context *ibctx);

/*
 * Ops left unset here are filled from libibverbs' verbs_dummy_ops by
 * verbs_set_ops() (libibverbs/dummy_ops.c, rdma-core v59): verbs returning an
 * int return EOPNOTSUPP, verbs returning a pointer return NULL with errno set
 * to EOPNOTSUPP (rereg_mr returns IBV_REREG_MR_ERR_INPUT with errno
 * EOPNOTSUPP). The exceptions are not errors: async_event, cq_event,
 * free_context and unimport_{dm,mr,pd} do nothing, and query_qp_data_in_order
 * returns 0 ("no ordering guarantee").
 *
 * query_qp_data_in_order stays that default on purpose: the kernel places
 * received data with CPU copies (memcpy/copy_to_user), whose stores within
 * one packet are not guaranteed to become visible in address order (x86 fast
 * string operations), so neither IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG nor
 * ..._ALIGNED_128_BYTES can be promised.
 *
 * Deliberately unset, so EOPNOTSUPP: reg_dmabuf_mr, and create_srq_ex.
 *
 * The ibv_cmd_* entries are libibverbs' generic uverbs commands used as the
 * ops themselves: their signatures are the ops' signatures, and there is
 * nothing to add in user space.
 *
 * Keep sorted.
 */
static const struct verbs_context_ops tbverbs_context_ops = {
	.alloc_mw = tbverbs_alloc_mw,
	.alloc_pd = tbverbs_alloc_pd,
	.attach_mcast = ibv_cmd_attach_mcast,
	.bind_mw = tbverbs_bind_mw,
	.create_ah = tbverbs_create_ah,
	.create_cq = tbverbs_create_cq,
	.create_cq_ex = tbverbs_create_cq_ex,
	.create_qp = tbverbs_create_qp,
	.create_qp_ex = tbverbs_create_qp_ex,
	.create_srq = tbverbs_create_srq,
	.dealloc_mw = tbverbs_dealloc_mw,
	.dealloc_pd = tbverbs_dealloc_pd,
	.dereg_mr = tbverbs_dereg_mr,
	.destroy_ah = tbverbs_destroy_ah,
	.destroy_cq = tbverbs_destroy_cq,
	.destroy_qp = tbverbs_destroy_qp,
	.destroy_srq = tbverbs_destroy_srq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.free_context = tbverbs_free_context,
	.modify_qp = tbverbs_modify_qp,
	.modify_srq = tbverbs_modify_srq,
	.poll_cq = tbverbs_poll_cq,
	.post_recv = ibv_cmd_post_recv,
	.post_send = tbverbs_post_send,
	.post_srq_recv = ibv_cmd_post_srq_recv,
	.query_device_ex = tbverbs_query_device_ex,
	.query_port = tbverbs_query_port,
	.query_qp = tbverbs_query_qp,
	.query_srq = tbverbs_query_srq,
	.reg_mr = tbverbs_reg_mr,
	.rereg_mr = tbverbs_rereg_mr,
	.req_notify_cq = ibv_cmd_req_notify_cq,
	.resize_cq = tbverbs_resize_cq,
};

static struct verbs_context *tbverbs_alloc_context(struct ibv_device *ibdev,
						   int cmd_fd,
						   void *private_data)
{
	struct tbverbs_cmd_alloc_ucontext_resp resp = {};
	struct ibv_get_context cmd = {};
	struct tbverbs_context *ctx;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	if (ibv_cmd_get_context(&ctx->ibv_ctx, &cmd, sizeof(cmd), NULL,
				&resp.ibv_resp, sizeof(resp)))
		goto err_free;

	if (resp.abi_version != TBVERBS_UVERBS_ABI_VERSION) {
		verbs_err(&ctx->ibv_ctx,
			  "kernel ABI version %u, provider supports %u\n",
			  resp.abi_version, TBVERBS_UVERBS_ABI_VERSION);
		errno = EPROTONOSUPPORT;
		goto err_free;
	}

	verbs_set_ops(&ctx->ibv_ctx, &tbverbs_context_ops);

	return &ctx->ibv_ctx;

err_free:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	return NULL;
}

static void tbverbs_free_context(struct ibv_context *ibctx)
{
	struct tbverbs_context *ctx = to_tctx(ibctx);

	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

/* ---- Device ---- */

static struct verbs_device *
tbverbs_device_alloc(struct verbs_sysfs_dev *sysfs_dev)
{
	struct tbverbs_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;

	return &dev->ibv_dev;
}

static void tbverbs_device_free(struct verbs_device *vdev)
{
	struct tbverbs_device *dev = to_tdev(&vdev->device);

	free(dev);
}

/*
 * The kernel registers with driver_id RDMA_DRIVER_UNKNOWN, so libibverbs
 * matches on the modalias of the ib_device's parent (sysfs
 * /sys/class/infiniband/<dev>/device/modalias), never on the device name,
 * which udev may rename.
 */
static const struct verbs_match_ent tbverbs_match_table[] = {
	/* Virtual-cable backend: parent is platform device "tbverbs_vcable". */
	VERBS_MODALIAS_MATCH("platform:" TBVERBS_VCABLE_DRV_NAME, NULL),
	/*
	 * USB4 backend: parent is a Thunderbolt XDomain service, modalias
	 * "tbsvc:k<key>p<prtcid>v<prtcvers>r<prtcrevs>". The 'p' stops a
	 * longer key that starts with ours from matching.
	 */
	VERBS_MODALIAS_MATCH("tbsvc:k" TBVERBS_SERVICE_KEY "p*", NULL),
	{},
};

static const struct verbs_device_ops tbverbs_dev_ops = {
	.name = "tbverbs",
	.match_min_abi_version = TBVERBS_UVERBS_ABI_VERSION,
	.match_max_abi_version = TBVERBS_UVERBS_ABI_VERSION,
	.match_table = tbverbs_match_table,
	.alloc_device = tbverbs_device_alloc,
	.uninit_device = tbverbs_device_free,
	.alloc_context = tbverbs_alloc_context,
};

PROVIDER_DRIVER(tbverbs, tbverbs_dev_ops);
