/* Unit: model coordinates (0..1000) to root pixels, agent.md 3 (no display). */
#include "common.h"
#include "test.h"
#include "x11.h"

TEST_DEFINE_GLOBALS;

/* The formula in floating point, as written in agent.md 3, for comparison. */
static int reference(int mon_pos, int mon_size, int sent, int v)
{
	long in_sent = lround(v / 1000.0 * sent);
	long px = in_sent * mon_size / sent;
	return mon_pos + (int)CLAMP(px, 0, mon_size - 1);
}

int main(void)
{
	struct x11_rect mon = {0, 0, 1920, 1080};
	struct x11_rect right = {1920, 0, 2560, 1440};
	int px = -1, py = -1;

	CHECK_INT_EQ(x11_map_model_point(&mon, 1280, 720, 0, 0, &px, &py), 0);
	CHECK_INT_EQ(px, 0);
	CHECK_INT_EQ(py, 0);
	CHECK_INT_EQ(x11_map_model_point(&mon, 1280, 720, 500, 500, &px, &py), 0);
	CHECK_INT_EQ(px, 960);
	CHECK_INT_EQ(py, 540);
	/* 1000 is the far edge: clamped to the last pixel, never one past it. */
	CHECK_INT_EQ(x11_map_model_point(&mon, 1280, 720, 1000, 1000, &px, &py), 0);
	CHECK_INT_EQ(px, 1919);
	CHECK_INT_EQ(py, 1079);
	/* A second monitor: offset by its origin, scaled by its own size. */
	CHECK_INT_EQ(x11_map_model_point(&right, 1280, 720, 500, 250, &px, &py), 0);
	CHECK_INT_EQ(px, 1920 + 1280);
	CHECK_INT_EQ(py, 360);
	CHECK_INT_EQ(x11_map_model_point(&right, 1280, 720, 1000, 0, &px, &py), 0);
	CHECK_INT_EQ(px, 1920 + 2559);

	/* Exhaustive against the floating-point formula for a few awkward sizes. */
	static const int sizes[][3] = {{1920, 1288, 1000}, {1366, 1000, 1}, {3840, 1092, 777}};
	int mismatches = 0;
	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
		struct x11_rect m = {sizes[s][2], 0, sizes[s][0], 1};
		for (int v = 0; v <= 1000; v++) {
			CHECK_INT_EQ(x11_map_model_point(&m, sizes[s][1], 1, v, 0, &px, &py), 0);
			mismatches += px != reference(m.x, m.width, sizes[s][1], v);
		}
	}
	CHECK_INT_EQ(mismatches, 0);

	/* Out of range and empty sizes are errors; outputs untouched. */
	px = py = -7;
	CHECK_INT_EQ(x11_map_model_point(&mon, 1280, 720, 1001, 0, &px, &py), -ERANGE);
	CHECK_INT_EQ(x11_map_model_point(&mon, 1280, 720, 0, -1, &px, &py), -ERANGE);
	CHECK_INT_EQ(x11_map_model_point(&mon, 0, 720, 0, 0, &px, &py), -EINVAL);
	struct x11_rect empty = {0, 0, 0, 1080};
	CHECK_INT_EQ(x11_map_model_point(&empty, 1280, 720, 0, 0, &px, &py), -EINVAL);
	CHECK_INT_EQ(x11_map_model_point(NULL, 1280, 720, 0, 0, &px, &py), -EINVAL);
	CHECK_INT_EQ(px, -7);
	CHECK_INT_EQ(py, -7);
	return test_exit();
}
