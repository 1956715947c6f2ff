// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Software credits: the arithmetic of tbv_credit.h, shared with the unit tests. */
#include "tbv_credit.h"

u32 tbv_credit_capacity(u32 ring_size)
{
	return ring_size - 1;
}

static void tbv_credit_tx_fed(struct tbv_credit_tx *tx)
{
	tx->starved_ticks = 0;
	tx->over_next = TBV_CREDIT_OVER_FIRST_TICK;
	tx->over_gap = 2;
}

void tbv_credit_tx_init(struct tbv_credit_tx *tx, u32 peer_capacity)
{
	tx->sent = 0;
	tx->limit = peer_capacity;
	tx->peer_capacity = peer_capacity;
	tbv_credit_tx_fed(tx);
}

void tbv_credit_rx_init(struct tbv_credit_rx *rx, u32 capacity)
{
	rx->capacity = capacity;
	rx->reaped = 0;
	rx->advertised = capacity;
	rx->answer_owed = false;
}

int tbv_credit_tx_update(struct tbv_credit_tx *tx, u32 limit)
{
	if ((int32_t)(limit - tx->limit) <= 0)
		return 0;
	if ((int32_t)(limit - (tx->sent + tx->peer_capacity)) > 0)
		return -EPROTO;
	tx->limit = limit;
	tbv_credit_tx_fed(tx);
	return 1;
}

bool tbv_credit_tx_request_due(const struct tbv_credit_tx *tx)
{
	return tbv_credit_tx_left(tx) > 0 || (int32_t)(tx->starved_ticks - tx->over_next) >= 0;
}

bool tbv_credit_tx_request_sent(struct tbv_credit_tx *tx, u32 seq)
{
	if ((int32_t)(tx->limit - seq) > 0)
		return false;
	tx->over_next = tx->starved_ticks + tx->over_gap;
	tx->over_gap = TBV_MIN(tx->over_gap * 2, (u32)TBV_CREDIT_OVER_MAX_TICKS);
	return true;
}

u32 tbv_credit_rx_request(struct tbv_credit_rx *rx, u32 seq)
{
	int32_t lost = (int32_t)(seq + 1 - rx->reaped);

	rx->reaped = seq + 1;
	rx->answer_owed = true;
	return lost > 0 ? (u32)lost : 0;
}

bool tbv_credit_rx_should_advertise(const struct tbv_credit_rx *rx)
{
	u32 step = rx->capacity / 4 ? rx->capacity / 4 : 1;

	return rx->answer_owed ||
	       (int32_t)(rx->reaped + rx->capacity - rx->advertised) >= (int32_t)step;
}

u32 tbv_credit_rx_advertise(struct tbv_credit_rx *rx)
{
	rx->advertised = rx->reaped + rx->capacity;
	rx->answer_owed = false;
	return rx->advertised;
}
