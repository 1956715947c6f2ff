// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include "tbv_test.h"

#define TBV_MAX_TESTS 512

int tbv_test_failures;
static struct tbv_test_case tests[TBV_MAX_TESTS];
static int ntests;

void tbv_test_register(const char *name, void (*fn)(void))
{
	if (ntests == TBV_MAX_TESTS) {
		fprintf(stderr, "too many tests\n");
		exit(2);
	}
	tests[ntests].name = name;
	tests[ntests].fn = fn;
	ntests++;
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0, i;

	printf("TAP version 13\n1..%d\n", ntests);
	for (i = 0; i < ntests; i++) {
		int before = tbv_test_failures;

		if (argc > 1 && !strstr(tests[i].name, argv[1]))
			continue;
		tests[i].fn();
		if (tbv_test_failures == before) {
			printf("ok %d - %s\n", i + 1, tests[i].name);
			passed++;
		} else {
			printf("not ok %d - %s\n", i + 1, tests[i].name);
			failed++;
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
