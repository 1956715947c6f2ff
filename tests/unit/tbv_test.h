/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A tiny test harness for the protocol core: TEST() registers a case, CHECK()
 * records a failure and continues. The runner prints TAP lines and closes with
 * "N passed, N failed" so CI counts the cases.
 */
#ifndef TBV_TEST_H
#define TBV_TEST_H

#include <stdio.h>
#include <string.h>

struct tbv_test_case {
	const char *name;
	void (*fn)(void);
};

extern int tbv_test_failures;

void tbv_test_register(const char *name, void (*fn)(void));

#define TEST(name)							\
	static void test_##name(void);					\
	__attribute__((constructor)) static void register_##name(void)	\
	{								\
		tbv_test_register(#name, test_##name);			\
	}								\
	static void test_##name(void)

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n",	\
				__FILE__, __LINE__, #cond);		\
			tbv_test_failures++;				\
		}							\
	} while (0)

#define CHECK_EQ(a, b)							\
	do {								\
		long long _a = (long long)(a), _b = (long long)(b);	\
		if (_a != _b) {						\
			fprintf(stderr, "  %s:%d: %s == %lld, want %s == %lld\n", \
				__FILE__, __LINE__, #a, _a, #b, _b);	\
			tbv_test_failures++;				\
		}							\
	} while (0)

#endif /* TBV_TEST_H */
