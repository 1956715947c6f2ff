/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * Shared between the thunderbolt_ibverbs kernel module and the rdma-core provider:
 * the uverbs ABI version and the driver-private parts of uverbs responses.
 */
#ifndef TBVERBS_ABI_H
#define TBVERBS_ABI_H

#include <linux/types.h>

#define TBVERBS_UVERBS_ABI_VERSION 1

/* Parent-device modaliases the provider matches on (device names may be renamed by udev). */
#define TBVERBS_VCABLE_DRV_NAME "tbverbs_vcable"
#define TBVERBS_SERVICE_KEY "tbverbs"

struct tbverbs_alloc_ucontext_resp {
	__u32 abi_version;	/* TBVERBS_UVERBS_ABI_VERSION */
	__u32 reserved;
};

/*
 * The driver method TBVERBS_METHOD_POST_SEND on UVERBS_OBJECT_QP: posts send
 * work requests of every opcode the device executes, including those the
 * generic POST_SEND command cannot carry (memory-window binds, local
 * invalidation, FLUSH, atomic write). RC and UC QPs only; UD work requests use the generic command.
 * IDs are in the driver namespace (UVERBS_ID_DRIVER_NS, 1 << 12).
 */
enum tbverbs_qp_methods {
	TBVERBS_METHOD_POST_SEND = (1U << 12),
};

enum tbverbs_post_send_attrs {
	TBVERBS_ATTR_POST_SEND_QP_HANDLE = (1U << 12),
	TBVERBS_ATTR_POST_SEND_WRS,	/* struct tbverbs_send_wr[] */
	TBVERBS_ATTR_POST_SEND_SGES,	/* struct tbverbs_sge[]: each WR's SGEs in turn */
	TBVERBS_ATTR_POST_SEND_BAD_WR,	/* out __u32: index of the first WR not posted */
};

struct tbverbs_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

struct tbverbs_send_wr {
	__aligned_u64 wr_id;
	__u32 opcode;			/* enum ib_uverbs_wr_opcode (= enum ibv_wr_opcode) */
	__u32 send_flags;		/* enum ib_uverbs_send_flags (= enum ibv_send_flags) */
	__u32 num_sge;
	__u32 imm_data;			/* __be32; SEND_WITH_INV, LOCAL_INV: the rkey */
	__aligned_u64 remote_addr;	/* RDMA, atomics, FLUSH */
	__u32 rkey;
	__u32 flush_length;		/* FLUSH */
	__aligned_u64 compare_add;	/* atomics; ATOMIC_WRITE without SGEs: its 8 bytes */
	__aligned_u64 swap;
	__u8 flush_type;		/* enum ib_uverbs_flush_type */
	__u8 flush_level;		/* enum ib_uverbs_flush_level */
	__u16 reserved;			/* 0 */
	__u32 reserved2;		/* 0 */
	__u32 bind_mw_rkey;		/* BIND_MW: the window's rkey now */
	__u32 bind_new_rkey;		/* its rkey after the bind */
	__u32 bind_mr_lkey;		/* the MR bound to */
	__u32 bind_access;		/* enum ib_uverbs_access_flags */
	__aligned_u64 bind_addr;
	__aligned_u64 bind_length;
};

#endif /* TBVERBS_ABI_H */
