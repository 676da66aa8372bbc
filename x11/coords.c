/* x11 coordinates: model space (0..1000 over the image sent) to root pixels. Pure. */
#include "common.h"
#include "x11-internal.h"

/* One axis of agent.md 3: mon + clamp(round(v / 1000 * sent) * mon_size / sent, 0, mon_size - 1).
 * Integer arithmetic (64-bit) so the result does not depend on floating-point rounding. */
static int map_axis(int mon_pos, int mon_size, int sent, int v)
{
	int64_t in_sent = ((int64_t)v * sent + 500) / 1000;
	int64_t px = in_sent * mon_size / sent;

	return mon_pos + (int)CLAMP(px, 0, (int64_t)mon_size - 1);
}

int x11_map_model_point(const struct x11_rect *monitor, int sent_w, int sent_h, int mx, int my, int *ret_px,
			int *ret_py)
{
	if (!monitor || monitor->width <= 0 || monitor->height <= 0 || sent_w <= 0 || sent_h <= 0)
		return -EINVAL;
	if (mx < 0 || mx > 1000 || my < 0 || my > 1000)
		return -ERANGE;
	*ret_px = map_axis(monitor->x, monitor->width, sent_w, mx);
	*ret_py = map_axis(monitor->y, monitor->height, sent_h, my);
	return 0;
}
