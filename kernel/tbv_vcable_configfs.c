// SPDX-License-Identifier: GPL-2.0
/*
 * Virtual cables are made through configfs:
 *
 *   mkdir /sys/kernel/config/tbverbs/vcable/NAME     a cable, unplugged
 *   echo 2 > .../NAME/rails                           1-4 ring pairs (also lanes,
 *                                                     lane_gbps, ring_size)
 *   echo 1 > .../NAME/plugged                         plug: both hosts log in
 *   cat .../NAME/end0_ibdev                           usb4_rdmaN once the link is up
 *   echo 0 > .../NAME/plugged; rmdir .../NAME         unplug, remove
 *
 * irq_throttle_us spaces each end's RX interrupts at least that far apart, as
 * thunderbolt.ko programs the NHI to (128 us); 0, the default: no throttle.
 * Each interrupt it holds back counts in stats as endN_railM_irqs_throttled
 * (N: the end that sent the frames). rx_sof and irq_replay model what a
 * controller may do that the module must not depend on: the SOF reported for
 * received frames (0: as sent; 1: 0 for a frame of one 256-byte transport
 * packet; 2: always 0) and whether an interrupt that came while the ring's
 * was masked is raised at unmask (1, the default) or lost (0).
 *
 * end1_proto_version (testing) makes end 1 offer only that protocol version,
 * so the refusal of an incompatible peer can be seen without a second build;
 * end1_dma_tunnels (testing) makes end 1 open the paths of at most that many
 * rails, as a firmware connection manager does (0: all of them);
 * end1_paths_delay_ms (testing) makes end 1 wait that long before it opens its
 * paths, so an unplug can meet a bring-up in progress; end1_rings_busy
 * (testing, any time) makes end 1 open no paths at all, as when another peer
 * took the controller's free rings; endN_suspended (testing)
 * suspends and resumes the host at end N as the USB4 backend's PM hooks do.
 * endN_faults injects faults into what end N sends (tbv_vcable_fault.c), at
 * any time: echo "drop_ppm=50000 reorder_ppm=1000" > .../NAME/end0_faults.
 */
#include <linux/configfs.h>
#include <linux/kstrtox.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>	/* IB_DEVICE_NAME_MAX */

#include "tbv_vcable.h"

static struct tbv_vcable *to_vcable(struct config_item *item)
{
	return container_of(to_config_group(item), struct tbv_vcable, group);
}

/* Cable parameters: settable only while unplugged. */
static ssize_t tbv_vcable_set_param(struct config_item *item, const char *page, size_t len,
				    unsigned int *field, bool (*valid)(unsigned int))
{
	struct tbv_vcable *cable = to_vcable(item);
	unsigned int v;
	int ret;

	ret = kstrtouint(page, 0, &v);
	if (ret)
		return ret;
	if (!valid(v))
		return -EINVAL;
	mutex_lock(&cable->lock);
	if (cable->plugged) {
		ret = -EBUSY;
	} else {
		*field = v;
		ret = len;
	}
	mutex_unlock(&cable->lock);
	return ret;
}

static bool tbv_valid_rails(unsigned int v)
{
	return v >= 1 && v <= TBV_MAX_RAILS;
}

static bool tbv_valid_lanes(unsigned int v)
{
	return v == 1 || v == 2;
}

static bool tbv_valid_lane_gbps(unsigned int v)
{
	return v == 10 || v == 20 || v == 40;
}

static bool tbv_valid_ring_size(unsigned int v)
{
	/* A ring must hold the largest netdev packet; sizes are powers of two. */
	return v >= 32 && v <= 1024 && !(v & (v - 1));
}

#define TBV_VCABLE_PARAM(_name, _field)						\
static ssize_t tbv_vcable_##_name##_show(struct config_item *item, char *page)	\
{										\
	return sprintf(page, "%u\n", READ_ONCE(to_vcable(item)->_field));	\
}										\
static ssize_t tbv_vcable_##_name##_store(struct config_item *item,		\
					  const char *page, size_t len)		\
{										\
	return tbv_vcable_set_param(item, page, len, &to_vcable(item)->_field,	\
				    tbv_valid_##_name);				\
}										\
CONFIGFS_ATTR(tbv_vcable_, _name)

static bool tbv_valid_end1_proto_version(unsigned int v)
{
	return v <= U16_MAX;
}

TBV_VCABLE_PARAM(rails, rails);
static bool tbv_valid_end1_dma_tunnels(unsigned int v)
{
	return v <= TBV_MAX_RAILS;
}

TBV_VCABLE_PARAM(end1_proto_version, end1_proto_version);
TBV_VCABLE_PARAM(end1_dma_tunnels, end1_dma_tunnels);

static bool tbv_valid_end1_paths_delay_ms(unsigned int v)
{
	return v <= 60000;
}

TBV_VCABLE_PARAM(end1_paths_delay_ms, end1_paths_delay_ms);

static ssize_t tbv_vcable_end1_rings_busy_show(struct config_item *item, char *page)
{
	return sprintf(page, "%d\n", READ_ONCE(to_vcable(item)->end1_rings_busy));
}

/* Unlike the parameters above, at any time: the next bring-up sees it. */
static ssize_t tbv_vcable_end1_rings_busy_store(struct config_item *item, const char *page,
						size_t len)
{
	bool busy;
	int ret = kstrtobool(page, &busy);

	if (ret)
		return ret;
	WRITE_ONCE(to_vcable(item)->end1_rings_busy, busy);
	return len;
}

CONFIGFS_ATTR(tbv_vcable_, end1_rings_busy);

static bool tbv_valid_irq_throttle_us(unsigned int v)
{
	return v <= TBV_VCABLE_MAX_IRQ_THROTTLE_US;
}

TBV_VCABLE_PARAM(irq_throttle_us, irq_throttle_us);

static bool tbv_valid_rx_sof(unsigned int v)
{
	return v <= TBV_VCABLE_RX_SOF_ZERO;
}

static bool tbv_valid_irq_replay(unsigned int v)
{
	return v <= 1;
}

TBV_VCABLE_PARAM(rx_sof, rx_sof);
TBV_VCABLE_PARAM(irq_replay, irq_replay);
TBV_VCABLE_PARAM(lanes, lanes);
TBV_VCABLE_PARAM(lane_gbps, lane_gbps);
TBV_VCABLE_PARAM(ring_size, ring_size);

static ssize_t tbv_vcable_plugged_show(struct config_item *item, char *page)
{
	return sprintf(page, "%d\n", READ_ONCE(to_vcable(item)->plugged));
}

static ssize_t tbv_vcable_plugged_store(struct config_item *item, const char *page,
					size_t len)
{
	struct tbv_vcable *cable = to_vcable(item);
	bool plug;
	int ret;

	ret = kstrtobool(page, &plug);
	if (ret)
		return ret;
	mutex_lock(&cable->lock);
	if (plug)
		ret = tbv_vcable_plug(cable);
	else
		tbv_vcable_unplug(cable);
	mutex_unlock(&cable->lock);
	return ret ? ret : len;
}
CONFIGFS_ATTR(tbv_vcable_, plugged);

static ssize_t tbv_vcable_end_show(struct config_item *item, char *page,
				   unsigned int idx, bool netdev)
{
	struct tbv_vcable *cable = to_vcable(item);
	char ibdev[IB_DEVICE_NAME_MAX] = "", ndev[IB_DEVICE_NAME_MAX] = "";

	mutex_lock(&cable->lock);
	if (cable->end[idx].link)
		tbv_link_dev_names(cable->end[idx].link, ibdev, ndev, sizeof(ibdev));
	mutex_unlock(&cable->lock);
	return sprintf(page, "%s\n", netdev ? ndev : ibdev);
}

/* Faults on what end @idx sends: settable at any time, applied to the next frame. */
static ssize_t tbv_vcable_faults_store(struct tbv_vcable *cable, unsigned int idx,
				       const char *page, size_t len)
{
	struct tbv_vcable_faults f;
	int ret;

	mutex_lock(&cable->lock);
	f = cable->end[idx].faults;
	ret = tbv_vcable_faults_parse(page, &f);
	if (!ret)
		ret = tbv_vcable_faults_set(&cable->end[idx], &f);
	mutex_unlock(&cable->lock);
	return ret ? ret : len;
}

/*
 * The testing switches of the host at end @idx: running (0 stops it without a
 * word, "peer vanishes"; 1 boots it again) and suspended.
 */
static ssize_t tbv_vcable_end_switch(struct tbv_vcable *cable, unsigned int idx,
				     const char *page, size_t len,
				     int (*set)(struct tbv_vcable *, unsigned int, bool))
{
	bool on;
	int ret;

	ret = kstrtobool(page, &on);
	if (ret)
		return ret;
	mutex_lock(&cable->lock);
	ret = set(cable, idx, on);
	mutex_unlock(&cable->lock);
	return ret ? ret : len;
}

static ssize_t tbv_vcable_running_show(struct tbv_vcable *cable, unsigned int idx, char *page)
{
	bool running;

	mutex_lock(&cable->lock);
	running = cable->plugged && cable->end[idx].link;
	mutex_unlock(&cable->lock);
	return sprintf(page, "%d\n", running);
}

#define TBV_VCABLE_END(_i)							\
static ssize_t tbv_vcable_end##_i##_uuid_show(struct config_item *item, char *page) \
{										\
	return sprintf(page, "%pUb\n", &to_vcable(item)->end[_i].uuid);		\
}										\
static ssize_t tbv_vcable_end##_i##_ibdev_show(struct config_item *item, char *page) \
{										\
	return tbv_vcable_end_show(item, page, _i, false);			\
}										\
static ssize_t tbv_vcable_end##_i##_netdev_show(struct config_item *item, char *page) \
{										\
	return tbv_vcable_end_show(item, page, _i, true);			\
}										\
static ssize_t tbv_vcable_end##_i##_faults_show(struct config_item *item, char *page) \
{										\
	return tbv_vcable_faults_show(&to_vcable(item)->end[_i].faults, page);	\
}										\
static ssize_t tbv_vcable_end##_i##_faults_store(struct config_item *item,	\
						 const char *page, size_t len)	\
{										\
	return tbv_vcable_faults_store(to_vcable(item), _i, page, len);		\
}										\
static ssize_t tbv_vcable_end##_i##_running_show(struct config_item *item, char *page) \
{										\
	return tbv_vcable_running_show(to_vcable(item), _i, page);		\
}										\
static ssize_t tbv_vcable_end##_i##_running_store(struct config_item *item,	\
						  const char *page, size_t len)	\
{										\
	return tbv_vcable_end_switch(to_vcable(item), _i, page, len,		\
				     tbv_vcable_end_set_running);			\
}										\
static ssize_t tbv_vcable_end##_i##_suspended_show(struct config_item *item, char *page) \
{										\
	return sprintf(page, "%d\n", READ_ONCE(to_vcable(item)->end[_i].suspended)); \
}										\
static ssize_t tbv_vcable_end##_i##_suspended_store(struct config_item *item,	\
						    const char *page, size_t len) \
{										\
	return tbv_vcable_end_switch(to_vcable(item), _i, page, len,		\
				     tbv_vcable_end_set_suspended);			\
}										\
CONFIGFS_ATTR(tbv_vcable_, end##_i##_faults);					\
CONFIGFS_ATTR(tbv_vcable_, end##_i##_running);					\
CONFIGFS_ATTR(tbv_vcable_, end##_i##_suspended);				\
CONFIGFS_ATTR_RO(tbv_vcable_, end##_i##_uuid);					\
CONFIGFS_ATTR_RO(tbv_vcable_, end##_i##_ibdev);					\
CONFIGFS_ATTR_RO(tbv_vcable_, end##_i##_netdev)

TBV_VCABLE_END(0);
TBV_VCABLE_END(1);

static ssize_t tbv_vcable_stats_show(struct config_item *item, char *page)
{
	struct tbv_vcable *cable = to_vcable(item);
	unsigned int from, rail;
	ssize_t n = 0;

	for (from = 0; from < 2; from++) {
		for (rail = 0; rail < READ_ONCE(cable->rails); rail++) {
			struct tbv_vcable_dir_stats *st = &cable->stats[from][rail];

			n += scnprintf(page + n, PAGE_SIZE - n,
				       "end%u_rail%u_tx_frames %lld\n"
				       "end%u_rail%u_tx_bytes %lld\n"
				       "end%u_rail%u_dropped_no_rx_buffer %lld\n"
				       "end%u_rail%u_dropped_path_closed %lld\n"
				       "end%u_rail%u_dropped_fault %lld\n"
				       "end%u_rail%u_duplicated %lld\n"
				       "end%u_rail%u_reordered %lld\n"
				       "end%u_rail%u_corrupted %lld\n"
				       "end%u_rail%u_irqs_throttled %lld\n"
				       "end%u_rail%u_cut %lld\n",
				       from, rail, atomic64_read(&st->frames),
				       from, rail, atomic64_read(&st->bytes),
				       from, rail, atomic64_read(&st->dropped_no_buffer),
				       from, rail, atomic64_read(&st->dropped_path_closed),
				       from, rail, atomic64_read(&st->dropped_fault),
				       from, rail, atomic64_read(&st->duplicated),
				       from, rail, atomic64_read(&st->reordered),
				       from, rail, atomic64_read(&st->corrupted),
				       from, rail, atomic64_read(&st->irqs_throttled),
				       from, rail, atomic64_read(&st->cut));
		}
	}
	return n;
}
CONFIGFS_ATTR_RO(tbv_vcable_, stats);

/*
 * Testing, a hostile peer: endN_inject takes a 4-byte prefix (rail, SOF, EOF,
 * 0) and a frame, which end N puts on the wire as if its NHI had sent it.
 * configfs writes a binary attribute when the file is closed and drops the
 * result: a refused injection (bad prefix, unplugged) is silent, and tests
 * confirm delivery through the receiver's counters.
 */
#define TBV_INJECT_PREFIX	4

static ssize_t tbv_vcable_inject_write(struct config_item *item, unsigned int idx,
				       const void *buf, size_t count)
{
	struct tbv_vcable *cable = to_vcable(item);
	const u8 *p = buf;
	int ret;

	if (count < TBV_INJECT_PREFIX || p[3])
		return -EINVAL;
	mutex_lock(&cable->lock);
	ret = cable->plugged ? tbv_vcable_inject(&cable->end[idx], p[0], p + TBV_INJECT_PREFIX,
						 count - TBV_INJECT_PREFIX, p[1], p[2]) :
			       -ENOTCONN;
	mutex_unlock(&cable->lock);
	return ret ? ret : count;
}

#define TBV_VCABLE_INJECT(_i)							\
static ssize_t tbv_vcable_end##_i##_inject_write(struct config_item *item,	\
						 const void *buf, size_t count)	\
{										\
	return tbv_vcable_inject_write(item, _i, buf, count);			\
}										\
CONFIGFS_BIN_ATTR_WO(tbv_vcable_, end##_i##_inject, NULL,			\
		     TBV_INJECT_PREFIX + TBV_FRAME_SIZE)

TBV_VCABLE_INJECT(0);
TBV_VCABLE_INJECT(1);

/*
 * Testing, a hostile peer's control channel: endN_ctl_last reads the last
 * control request end N sent (a login, once the link is up); endN_ctl_inject
 * makes end N send the bytes written (a replay, or a crafted request) as a
 * request. Like endN_inject, a refused write is silent.
 */
static ssize_t tbv_vcable_ctl_inject_write(struct config_item *item, unsigned int idx,
					   const void *buf, size_t count)
{
	struct tbv_vcable *cable = to_vcable(item);
	int ret;

	mutex_lock(&cable->lock);
	ret = cable->plugged ? tbv_vcable_ctl_inject(&cable->end[idx], buf, count) : -ENOTCONN;
	mutex_unlock(&cable->lock);
	return ret ? ret : count;
}

static ssize_t tbv_vcable_ctl_last_read(struct config_item *item, unsigned int idx,
					void *buf, size_t max_count)
{
	return tbv_vcable_ctl_last(&to_vcable(item)->end[idx], buf, max_count);
}

#define TBV_VCABLE_CTL(_i)							\
static ssize_t tbv_vcable_end##_i##_ctl_inject_write(struct config_item *item,	\
						     const void *buf, size_t count) \
{										\
	return tbv_vcable_ctl_inject_write(item, _i, buf, count);		\
}										\
static ssize_t tbv_vcable_end##_i##_ctl_last_read(struct config_item *item,	\
						  void *buf, size_t max_count)	\
{										\
	return tbv_vcable_ctl_last_read(item, _i, buf, max_count);		\
}										\
CONFIGFS_BIN_ATTR_WO(tbv_vcable_, end##_i##_ctl_inject, NULL, TBV_CTL_MAX_BYTES); \
CONFIGFS_BIN_ATTR_RO(tbv_vcable_, end##_i##_ctl_last, NULL, TBV_CTL_MAX_BYTES)

TBV_VCABLE_CTL(0);
TBV_VCABLE_CTL(1);

static struct configfs_bin_attribute *tbv_vcable_bin_attrs[] = {
	&tbv_vcable_attr_end0_inject,
	&tbv_vcable_attr_end1_inject,
	&tbv_vcable_attr_end0_ctl_inject,
	&tbv_vcable_attr_end1_ctl_inject,
	&tbv_vcable_attr_end0_ctl_last,
	&tbv_vcable_attr_end1_ctl_last,
	NULL,
};

static struct configfs_attribute *tbv_vcable_attrs[] = {
	&tbv_vcable_attr_rails,
	&tbv_vcable_attr_lanes,
	&tbv_vcable_attr_lane_gbps,
	&tbv_vcable_attr_ring_size,
	&tbv_vcable_attr_end1_proto_version,
	&tbv_vcable_attr_end1_dma_tunnels,
	&tbv_vcable_attr_end1_rings_busy,
	&tbv_vcable_attr_end1_paths_delay_ms,
	&tbv_vcable_attr_irq_throttle_us,
	&tbv_vcable_attr_rx_sof,
	&tbv_vcable_attr_irq_replay,
	&tbv_vcable_attr_plugged,
	&tbv_vcable_attr_end0_uuid,
	&tbv_vcable_attr_end1_uuid,
	&tbv_vcable_attr_end0_ibdev,
	&tbv_vcable_attr_end1_ibdev,
	&tbv_vcable_attr_end0_netdev,
	&tbv_vcable_attr_end1_netdev,
	&tbv_vcable_attr_end0_faults,
	&tbv_vcable_attr_end1_faults,
	&tbv_vcable_attr_end0_running,
	&tbv_vcable_attr_end1_running,
	&tbv_vcable_attr_end0_suspended,
	&tbv_vcable_attr_end1_suspended,
	&tbv_vcable_attr_stats,
	NULL,
};

static void tbv_vcable_release(struct config_item *item)
{
	struct tbv_vcable *cable = to_vcable(item);

	tbv_vcable_cleanup(cable);
	mutex_destroy(&cable->cm_lock);
	mutex_destroy(&cable->lock);
	kfree(cable);
}

static struct configfs_item_operations tbv_vcable_item_ops = {
	.release = tbv_vcable_release,
};

static const struct config_item_type tbv_vcable_type = {
	.ct_item_ops = &tbv_vcable_item_ops,
	.ct_attrs = tbv_vcable_attrs,
	.ct_bin_attrs = tbv_vcable_bin_attrs,
	.ct_owner = THIS_MODULE,
};

static struct config_group *tbv_vcable_make(struct config_group *group, const char *name)
{
	struct tbv_vcable *cable = kzalloc(sizeof(*cable), GFP_KERNEL);

	if (!cable)
		return ERR_PTR(-ENOMEM);
	tbv_vcable_setup(cable);
	config_group_init_type_name(&cable->group, name, &tbv_vcable_type);
	return &cable->group;
}

/* rmdir: pull the cable out first. */
static void tbv_vcable_drop(struct config_group *group, struct config_item *item)
{
	struct tbv_vcable *cable = to_vcable(item);

	mutex_lock(&cable->lock);
	tbv_vcable_unplug(cable);
	mutex_unlock(&cable->lock);
	config_item_put(item);
}

static struct configfs_group_operations tbv_vcable_dir_ops = {
	.make_group = tbv_vcable_make,
	.drop_item = tbv_vcable_drop,
};

static const struct config_item_type tbv_vcable_dir_type = {
	.ct_group_ops = &tbv_vcable_dir_ops,
	.ct_owner = THIS_MODULE,
};

static const struct config_item_type tbv_root_type = {
	.ct_owner = THIS_MODULE,
};

static struct config_group tbv_vcable_dir;

static struct configfs_subsystem tbv_configfs = {
	.su_group = {
		.cg_item = {
			.ci_namebuf = "tbverbs",
			.ci_type = &tbv_root_type,
		},
	},
};

static int __init tbv_vcable_init(void)
{
	int ret;

	config_group_init(&tbv_configfs.su_group);
	mutex_init(&tbv_configfs.su_mutex);
	config_group_init_type_name(&tbv_vcable_dir, "vcable", &tbv_vcable_dir_type);
	configfs_add_default_group(&tbv_vcable_dir, &tbv_configfs.su_group);
	ret = configfs_register_subsystem(&tbv_configfs);
	if (ret)
		pr_err("%s: cannot register configfs subsystem (%d)\n", KBUILD_MODNAME, ret);
	return ret;
}

/* Every cable is gone: each configfs directory holds a reference to this module. */
static void __exit tbv_vcable_exit(void)
{
	configfs_unregister_subsystem(&tbv_configfs);
}

module_init(tbv_vcable_init);
module_exit(tbv_vcable_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tbverbs virtual cable: two simulated USB4 hosts in one kernel, for tests");
MODULE_AUTHOR("The tbverbs developers");
MODULE_IMPORT_NS(TBV_LINK_NS);
