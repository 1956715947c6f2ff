// SPDX-License-Identifier: GPL-2.0
/*
 * The driver's own uverbs method: TBVERBS_METHOD_POST_SEND posts send work
 * requests of every opcode the device executes. The generic POST_SEND command
 * carries only the opcodes the core knows how to marshal (no memory-window
 * binds, local invalidation, FLUSH or atomic write), so the provider uses this method for a list
 * holding any of those. Each work request is checked exactly like a kernel
 * one (tbv_post_one()); nothing in the user's buffers is trusted.
 */
#define UVERBS_MODULE_NAME tbv_ib
#include <rdma/uverbs_named_ioctl.h>

#include "tbv.h"
#include "tbverbs-abi.h"

/* One user work request in the driver's terms, its SGEs copied into @sge. */
static int tbv_uapi_wr(struct tbv_post_wr *p, const struct tbverbs_send_wr *uwr,
		       const struct tbverbs_sge *usge, struct ib_sge *sge)
{
	u32 i;

	if (uwr->reserved || uwr->reserved2 || uwr->num_sge > TBV_MAX_SGE)
		return -EINVAL;
	for (i = 0; i < uwr->num_sge; i++)
		sge[i] = (struct ib_sge){ .addr = usge[i].addr, .length = usge[i].length,
					  .lkey = usge[i].lkey };
	*p = (struct tbv_post_wr){
		.wr_id = uwr->wr_id,
		.opcode = uwr->opcode,		/* IB_WR_* equal IB_UVERBS_WR_* */
		.send_flags = uwr->send_flags,	/* IB_SEND_* equal IB_UVERBS_SEND_* */
		.sge = sge,
		.num_sge = uwr->num_sge,
		.remote_addr = uwr->remote_addr,
		.rkey = uwr->rkey,
		.swap = uwr->swap,
		.compare_add = uwr->compare_add,
		.flush_len = uwr->flush_length,
		.flush_type = uwr->flush_type,
		.flush_level = uwr->flush_level,
	};
	switch (uwr->opcode) {
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		p->imm = be32_to_cpu((__force __be32)uwr->imm_data);
		break;
	case IB_WR_SEND_WITH_INV:
	case IB_WR_LOCAL_INV:
		p->inv_rkey = uwr->imm_data;
		break;
	case IB_WR_BIND_MW:
		p->bind.mw_rkey = uwr->bind_mw_rkey;
		p->bind.new_rkey = uwr->bind_new_rkey;
		p->bind.mr_lkey = uwr->bind_mr_lkey;
		p->bind.addr = uwr->bind_addr;
		p->bind.length = uwr->bind_length;
		/* IB_ACCESS_* equal IB_UVERBS_ACCESS_*; tbv_mw_bind() refuses others */
		p->bind.access = uwr->bind_access;
		break;
	default:
		break;
	}
	return 0;
}

static int UVERBS_HANDLER(TBVERBS_METHOD_POST_SEND)(struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *ibqp = uverbs_attr_get_obj(attrs, TBVERBS_ATTR_POST_SEND_QP_HANDLE);
	int wrs_len = uverbs_attr_get_len(attrs, TBVERBS_ATTR_POST_SEND_WRS);
	int sges_len = uverbs_attr_get_len(attrs, TBVERBS_ATTR_POST_SEND_SGES);
	const struct tbverbs_send_wr *uwr;
	const struct tbverbs_sge *usge = NULL;
	struct ib_sge sge[TBV_MAX_SGE];
	u8 inline_buf[TBV_MAX_INLINE];
	u32 nwr, nsge = 0, used = 0, i = 0;
	struct tbv_post_wr p;
	struct tbv_qp *qp;
	int ret = 0;

	if (IS_ERR(ibqp))
		return PTR_ERR(ibqp);
	qp = to_tbv_qp(ibqp);
	if (wrs_len < 0 || wrs_len % sizeof(*uwr))
		return -EINVAL;
	nwr = wrs_len / sizeof(*uwr);
	uwr = uverbs_attr_get_alloced_ptr(attrs, TBVERBS_ATTR_POST_SEND_WRS);
	if (IS_ERR(uwr))
		return PTR_ERR(uwr);
	if (sges_len > 0) {
		if (sges_len % sizeof(*usge))
			return -EINVAL;
		nsge = sges_len / sizeof(*usge);
		usge = uverbs_attr_get_alloced_ptr(attrs, TBVERBS_ATTR_POST_SEND_SGES);
		if (IS_ERR(usge))
			return PTR_ERR(usge);
	}
	if (ibqp->qp_type != IB_QPT_RC && ibqp->qp_type != IB_QPT_UC)
		ret = -EINVAL;		/* UD needs address handles: the generic command */
	else if (!tbv_post_send_allowed(qp) || tbv_qp_is_shared(qp))
		ret = -EINVAL;		/* a ring QP's WQEs are in its SQ ring */
	for (; !ret && i < nwr; i++) {
		if (uwr[i].num_sge > nsge - used) {
			ret = -EINVAL;
			break;
		}
		ret = tbv_uapi_wr(&p, &uwr[i], usge + used, sge);
		if (!ret)
			ret = tbv_post_one(qp, &p, inline_buf);
		if (ret)
			break;
		used += uwr[i].num_sge;
	}
	if (i)
		tbv_qp_run(qp);
	/* written before the method's result: the provider reads it on failure too */
	if (uverbs_copy_to(attrs, TBVERBS_ATTR_POST_SEND_BAD_WR, &i, sizeof(i)) && !ret)
		ret = -EFAULT;
	return ret;
}

DECLARE_UVERBS_NAMED_METHOD(
	TBVERBS_METHOD_POST_SEND,
	UVERBS_ATTR_IDR(TBVERBS_ATTR_POST_SEND_QP_HANDLE, UVERBS_OBJECT_QP, UVERBS_ACCESS_READ,
			UA_MANDATORY),
	UVERBS_ATTR_PTR_IN(TBVERBS_ATTR_POST_SEND_WRS,
			   UVERBS_ATTR_MIN_SIZE(sizeof(struct tbverbs_send_wr)),
			   UA_MANDATORY, UA_ALLOC_AND_COPY),
	UVERBS_ATTR_PTR_IN(TBVERBS_ATTR_POST_SEND_SGES,
			   UVERBS_ATTR_MIN_SIZE(sizeof(struct tbverbs_sge)),
			   UA_OPTIONAL, UA_ALLOC_AND_COPY),
	UVERBS_ATTR_PTR_OUT(TBVERBS_ATTR_POST_SEND_BAD_WR, UVERBS_ATTR_TYPE(u32),
			    UA_MANDATORY));

ADD_UVERBS_METHODS(tbv_qp_methods, UVERBS_OBJECT_QP,
		   &UVERBS_METHOD(TBVERBS_METHOD_POST_SEND));

const struct uapi_definition tbv_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_QP, &tbv_qp_methods),
	{},
};
