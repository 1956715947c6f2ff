// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "tbv_test.h"
#include "../../kernel/proto/tbv_resp_rules.h"

#define FULL	TBV_RDMA_MAX_PAYLOAD

static struct tbv_rdma_hdr pkt(u8 kind, u8 flags, u16 payload_len, u32 len)
{
	struct tbv_rdma_hdr h = { .kind = kind, .flags = flags, .payload_len = payload_len,
				  .len = len };

	return h;
}

/* Accept and count @h as the kernel does; the verdict. */
static enum tbv_resp_verdict feed(struct tbv_resp_msg *m, struct tbv_rdma_hdr h, u32 recv_len,
				  u32 *total)
{
	enum tbv_resp_verdict v = tbv_resp_accept(m, &h, recv_len);

	if (v == TBV_RESP_OK)
		*total = tbv_resp_placed(m, &h, recv_len);
	return v;
}

TEST(resp_rules_a_send_and_a_write_each_complete_in_sequence)
{
	struct tbv_resp_msg m = {};
	u32 total = 0;

	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_FIRST, FULL, 0), 3 * FULL, &total), TBV_RESP_OK);
	CHECK_EQ(m.kind, TBV_MSG_SEND);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, 0, FULL, 0), 0, &total), TBV_RESP_OK);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_LAST, 7, 0), 0, &total), TBV_RESP_OK);
	CHECK_EQ(total, 2 * FULL + 7);
	CHECK_EQ(m.kind, TBV_MSG_NONE);

	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_FIRST, FULL, FULL + 9), 0, &total),
		 TBV_RESP_OK);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_LAST | TBV_RF_IMM, 9, 0), 0, &total),
		 TBV_RESP_OK);
	CHECK_EQ(total, FULL + 9);	/* the byte_len of a WRITE with immediate */
	CHECK_EQ(m.kind, TBV_MSG_NONE);
}

/* Issue 23 item 4: a WRITE's first packet used to set the SEND's offset. */
TEST(resp_rules_interleaved_send_and_write_are_out_of_sequence)
{
	struct tbv_resp_msg m = {};
	u32 total = 0;

	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_FIRST, FULL, 0), 4 * FULL, &total), TBV_RESP_OK);
	/* a WRITE may not start inside a SEND, nor end one */
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_FIRST, FULL, 100000), 0, &total),
		 TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_FIRST | TBV_RF_LAST, 4, 4), 0, &total),
		 TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_LAST | TBV_RF_IMM, 4, 0), 0, &total),
		 TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, 0, FULL, 0), 0, &total), TBV_RESP_BAD_SEQ);
	/* nor does a new SEND, a READ or an atomic */
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_FIRST | TBV_RF_LAST, 4, 0), FULL, &total),
		 TBV_RESP_BAD_SEQ);
	CHECK_EQ(tbv_resp_seq_check(&m, TBV_RK_READ_REQ, TBV_RF_FIRST | TBV_RF_LAST),
		 TBV_RESP_BAD_SEQ);
	CHECK_EQ(tbv_resp_seq_check(&m, TBV_RK_ATOMIC, TBV_RF_FIRST | TBV_RF_LAST),
		 TBV_RESP_BAD_SEQ);
	/* the SEND's count is its own: untouched by what was refused */
	CHECK_EQ(m.kind, TBV_MSG_SEND);
	CHECK_EQ(m.placed, FULL);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_LAST, 3, 0), 0, &total), TBV_RESP_OK);
	CHECK_EQ(total, FULL + 3);

	/* and the other way round: a SEND's packets inside a WRITE */
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_FIRST, FULL, 2 * FULL), 0, &total),
		 TBV_RESP_OK);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_LAST, 4, 0), 0, &total), TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, 0, FULL, 0), 0, &total), TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_FIRST, FULL, 0), 4 * FULL, &total),
		 TBV_RESP_BAD_SEQ);
	CHECK_EQ(tbv_resp_seq_check(&m, TBV_RK_FLUSH, TBV_RF_FIRST | TBV_RF_LAST),
		 TBV_RESP_BAD_SEQ);
}

TEST(resp_rules_middle_or_last_without_a_first_is_out_of_sequence)
{
	struct tbv_resp_msg m = {};
	u32 total = 0;

	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, 0, FULL, 0), 0, &total), TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_LAST, 1, 0), 0, &total), TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, 0, FULL, 0), 0, &total), TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_LAST, 1, 0), 0, &total), TBV_RESP_BAD_SEQ);
	CHECK_EQ(tbv_resp_seq_check(&m, TBV_RK_READ_REQ, TBV_RF_FIRST | TBV_RF_LAST), TBV_RESP_OK);
	CHECK_EQ(tbv_resp_seq_check(&m, TBV_RK_ACK, 0), TBV_RESP_BAD_SEQ);
	CHECK_EQ(m.kind, TBV_MSG_NONE);
}

TEST(resp_rules_a_send_never_counts_past_its_receive_buffer)
{
	struct tbv_resp_msg m = {};
	u32 total = 0;

	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_FIRST | TBV_RF_LAST, 11, 0), 10, &total),
		 TBV_RESP_TOO_LONG);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_FIRST, FULL, 0), FULL + 10, &total),
		 TBV_RESP_OK);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, 0, FULL, 0), 0, &total), TBV_RESP_TOO_LONG);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_LAST, 11, 0), 0, &total), TBV_RESP_TOO_LONG);
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_LAST, 10, 0), 0, &total), TBV_RESP_OK);
	CHECK_EQ(total, FULL + 10);
	/* a room of 0xffffffff and a count near it: compared without wrapping */
	m = (struct tbv_resp_msg){ .kind = TBV_MSG_SEND, .room = 0xffffffffu,
				   .placed = 0xffffffffu - 5 };
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_LAST, 6, 0), 0, &total), TBV_RESP_TOO_LONG);
}

TEST(resp_rules_a_write_places_exactly_what_it_announced)
{
	struct tbv_resp_msg m = {};
	u32 total = 0;

	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_FIRST, FULL, FULL + 5), 0, &total),
		 TBV_RESP_OK);
	/* a middle packet would leave nothing for the last: more than announced */
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, 0, FULL, 0), 0, &total), TBV_RESP_BAD_LEN);
	/* a last packet short of, or past, the announced length */
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_LAST, 4, 0), 0, &total), TBV_RESP_BAD_LEN);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_LAST, 6, 0), 0, &total), TBV_RESP_BAD_LEN);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_LAST, 5, 0), 0, &total), TBV_RESP_OK);
	CHECK_EQ(total, FULL + 5);
	/* a zero-length WRITE is one packet */
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_FIRST | TBV_RF_LAST, 0, 0), 0, &total),
		 TBV_RESP_OK);
	CHECK_EQ(total, 0);
}

TEST(resp_rules_an_abandoned_message_lets_a_new_one_start)
{
	struct tbv_resp_msg m = {};
	u32 total = 0;

	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_FIRST, FULL, 0), 2 * FULL, &total), TBV_RESP_OK);
	tbv_resp_abandon(&m);	/* UC: a gap, or a refused packet */
	CHECK_EQ(feed(&m, pkt(TBV_RK_SEND, TBV_RF_LAST, 1, 0), 0, &total), TBV_RESP_BAD_SEQ);
	CHECK_EQ(feed(&m, pkt(TBV_RK_WRITE, TBV_RF_FIRST | TBV_RF_LAST, 4, 4), 0, &total),
		 TBV_RESP_OK);
	CHECK_EQ(total, 4);
}
