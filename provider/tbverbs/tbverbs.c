// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rdma-core provider for thunderbolt_ibverbs: RDMA (RoCE v2 link layer) devices
 * usb4_rdmaN exposed by the kernel module over USB4/Thunderbolt cables.
 *
 * Layout: one section per object type (device/port, PD, then CQ/QP/MR as they
 * are added), the verbs_context_ops table, context and device lifetime, and the
 * match table. Everything goes through the kernel's uverbs commands; there is
 * no fast path in user space yet.
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

/* ---- Completion queues: not yet ---- */

/* ---- Queue pairs: not yet ---- */

/* ---- Memory regions: not yet ---- */

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
 * Keep sorted.
 */
static const struct verbs_context_ops tbverbs_context_ops = {
	.alloc_pd = tbverbs_alloc_pd,
	.dealloc_pd = tbverbs_dealloc_pd,
	.free_context = tbverbs_free_context,
	.query_device_ex = tbverbs_query_device_ex,
	.query_port = tbverbs_query_port,
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
