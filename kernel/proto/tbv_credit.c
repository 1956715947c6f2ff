// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Software credits: the arithmetic of tbv_credit.h, shared with the unit tests. */
#include "tbv_credit.h"

u32 tbv_credit_capacity(u32 ring_size)
{
	return ring_size - 1;
}

void tbv_credit_tx_init(struct tbv_credit_tx *tx, u32 peer_capacity)
{
	tx->sent = 0;
	tx->limit = peer_capacity;
	tx->peer_capacity = peer_capacity;
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
	return 1;
}

void tbv_credit_rx_request(struct tbv_credit_rx *rx, u32 seq)
{
	rx->reaped = seq + 1;
	rx->answer_owed = true;
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
