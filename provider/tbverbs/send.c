// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Posting send work requests, and memory windows.
 *
 * The kernel's generic POST_SEND command marshals only the opcodes the core
 * knows (sends, RDMA, atomics, send with invalidate): a list holding a
 * memory-window bind, a local invalidation, a FLUSH or an atomic write goes
 * through the driver's own uverbs method TBVERBS_METHOD_POST_SEND
 * (include/uapi/tbverbs-abi.h), which carries every opcode of RC and UC QPs;
 * every other list keeps the generic command. Windows are allocated and freed with the generic commands; a type 1
 * bind (ibv_bind_mw) is a BIND_MW work request, as the verbs define it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/cmd_ioctl.h>
#include <rdma/ib_user_ioctl_cmds.h>

#include "tbverbs.h"

enum {
	/* Work requests per method call: 2.8 KiB of WRs and at most 8 KiB of SGEs on the stack. */
	TBVERBS_METHOD_CHUNK = 32,
	TBVERBS_METHOD_MAX_SGE = 16,	/* the device's max_send_sge */
};

static bool tbverbs_wr_needs_method(const struct ibv_send_wr *wr)
{
	return wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_LOCAL_INV ||
	       wr->opcode == IBV_WR_FLUSH || wr->opcode == IBV_WR_ATOMIC_WRITE;
}

/* One work request in the method's format; its SGEs appended at *sge. */
static int tbverbs_wr_to_uapi(const struct ibv_send_wr *wr, struct tbverbs_send_wr *u,
			      struct tbverbs_sge *sge)
{
	int i;

	if (wr->num_sge < 0 || wr->num_sge > TBVERBS_METHOD_MAX_SGE)
		return EINVAL;
	memset(u, 0, sizeof(*u));
	u->wr_id = wr->wr_id;
	u->opcode = wr->opcode;
	u->send_flags = wr->send_flags;
	u->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		u->imm_data = (__u32)wr->imm_data;	/* the __be32 bits */
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		u->imm_data = wr->invalidate_rkey;
		break;
	default:
		break;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		u->remote_addr = wr->wr.rdma.remote_addr;
		u->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_WRITE:
		/* the 8 bytes: from the one SGE (ibv_post_send), or in compare_add (ibv_wr_*) */
		u->remote_addr = wr->wr.atomic.remote_addr;
		u->rkey = wr->wr.atomic.rkey;
		u->compare_add = wr->wr.atomic.compare_add;
		break;
	case IBV_WR_FLUSH:
		/* only ibv_wr_flush() makes these: see tbverbs_wr_flush() */
		u->remote_addr = wr->wr.rdma.remote_addr;
		u->rkey = wr->wr.rdma.rkey;
		u->flush_length = wr->imm_data;
		u->flush_type = wr->qp_type.xrc.remote_srqn & 0xff;
		u->flush_level = wr->qp_type.xrc.remote_srqn >> 8;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		u->remote_addr = wr->wr.atomic.remote_addr;
		u->rkey = wr->wr.atomic.rkey;
		u->compare_add = wr->wr.atomic.compare_add;
		u->swap = wr->wr.atomic.swap;
		break;
	case IBV_WR_BIND_MW:
		/* no MR only for an unbind (length 0), as ibv_bind_mw() allows */
		if (!wr->bind_mw.mw || (!wr->bind_mw.bind_info.mr && wr->bind_mw.bind_info.length))
			return EINVAL;
		u->bind_mw_rkey = wr->bind_mw.mw->rkey;
		u->bind_new_rkey = wr->bind_mw.rkey;
		u->bind_mr_lkey = wr->bind_mw.bind_info.mr ? wr->bind_mw.bind_info.mr->lkey : 0;
		u->bind_access = wr->bind_mw.bind_info.mw_access_flags;
		u->bind_addr = wr->bind_mw.bind_info.addr;
		u->bind_length = wr->bind_mw.bind_info.length;
		break;
	default:
		break;
	}
	return 0;
}

/* Post up to TBVERBS_METHOD_CHUNK work requests from @wr; *@posted says how many went in. */
static int tbverbs_post_chunk(struct ibv_qp *qp, struct ibv_send_wr *wr, uint32_t *posted,
			      struct ibv_send_wr **next)
{
	DECLARE_COMMAND_BUFFER(cmd, UVERBS_OBJECT_QP, TBVERBS_METHOD_POST_SEND, 4);
	struct tbverbs_send_wr uwr[TBVERBS_METHOD_CHUNK];
	struct tbverbs_sge sge[TBVERBS_METHOD_CHUNK * TBVERBS_METHOD_MAX_SGE];
	uint32_t n = 0, nsge = 0, bad = 0;
	int ret;

	for (; wr && n < TBVERBS_METHOD_CHUNK; wr = wr->next, n++) {
		ret = tbverbs_wr_to_uapi(wr, &uwr[n], &sge[nsge]);
		if (ret)
			break;
		nsge += uwr[n].num_sge;
	}
	*next = wr;
	if (!n) {
		*posted = 0;
		return EINVAL;
	}
	fill_attr_in_obj(cmd, TBVERBS_ATTR_POST_SEND_QP_HANDLE, qp->handle);
	fill_attr_in(cmd, TBVERBS_ATTR_POST_SEND_WRS, uwr, n * sizeof(uwr[0]));
	if (nsge)
		fill_attr_in(cmd, TBVERBS_ATTR_POST_SEND_SGES, sge, nsge * sizeof(sge[0]));
	fill_attr_out_ptr(cmd, TBVERBS_ATTR_POST_SEND_BAD_WR, &bad);
	ret = execute_ioctl(qp->context, cmd);
	*posted = ret ? (bad < n ? bad : 0) : n;
	return ret;
}

static int tbverbs_post_send_method(struct ibv_qp *qp, struct ibv_send_wr *wr,
				    struct ibv_send_wr **bad_wr)
{
	while (wr) {
		struct ibv_send_wr *next, *first = wr;
		uint32_t posted, i;
		int ret;

		ret = tbverbs_post_chunk(qp, wr, &posted, &next);
		if (ret) {
			for (i = 0; i < posted; i++)
				first = first->next;
			*bad_wr = first;
			return ret;
		}
		wr = next;
	}
	return 0;
}

int tbverbs_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	const struct ibv_send_wr *w;

	if (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_UC)
		for (w = wr; w; w = w->next)
			if (tbverbs_wr_needs_method(w))
				return tbverbs_post_send_method(qp, wr, bad_wr);
	return ibv_cmd_post_send(qp, wr, bad_wr);
}

/* ---- Memory windows ---- */

struct ibv_mw *tbverbs_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp = {};
	struct ibv_alloc_mw cmd = {};
	struct ibv_mw *mw;
	int ret;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	ret = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	return mw;
}

int tbverbs_dealloc_mw(struct ibv_mw *mw)
{
	int ret = ibv_cmd_dealloc_mw(mw);

	if (ret)
		return ret;
	free(mw);
	return 0;
}

/* ibv_bind_mw() for type 1 windows: a BIND_MW work request with the next rkey. */
int tbverbs_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {
		.wr_id = mw_bind->wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = mw_bind->send_flags,
	}, *bad;
	int ret;

	if (mw->type != IBV_MW_TYPE_1 ||
	    (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED))
		return EINVAL;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	ret = tbverbs_post_send(qp, &wr, &bad);
	if (ret)
		return ret;
	/* the window's new rkey; a failed bind (an error completion) leaves it unusable */
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}
