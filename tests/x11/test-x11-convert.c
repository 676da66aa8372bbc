/* Unit: conversion of X images to packed RGB for every layout the capture accepts, including
 * those Xvfb cannot produce (24 bits per pixel, MSB-first servers, RGBX masks), and refusal of
 * the others (no display). */
#include "common.h"
#include "test.h"
#include "x11-internal.h"

TEST_DEFINE_GLOBALS;

#define W 13 /* odd, and more than one 4-pixel lane plus a tail */
#define H 3

/* The colour of pixel (x, y) in the synthetic images. */
static uint32_t rgb_at(int x, int y)
{
	return (uint32_t)((x * 19 + y * 7) & 0xff) << 16 | (uint32_t)((x * 3 + 100) & 0xff) << 8 |
	       (uint32_t)((y * 50 + x) & 0xff);
}

/* Builds an image with the given layout; channel positions come from the masks. */
static XImage make_image(uint8_t *data, int bpp, int byte_order, unsigned long rmask, unsigned long gmask,
			 unsigned long bmask)
{
	XImage img = {
		.width = W,
		.height = H,
		.format = ZPixmap,
		.data = (char *)data,
		.byte_order = byte_order,
		.bits_per_pixel = bpp,
		.bytes_per_line = W * bpp / 8 + 5, /* padded rows */
		.red_mask = rmask,
		.green_mask = gmask,
		.blue_mask = bmask,
		.depth = 24,
	};
	int bytes = bpp / 8;
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++) {
			uint32_t c = rgb_at(x, y), v = 0;
			for (int ch = 0; ch < 3; ch++) {
				unsigned long m = ch == 0 ? rmask : ch == 1 ? gmask : bmask;
				if (!m)
					continue; /* a layout without this channel */
				int shift = __builtin_ctzl(m);
				v |= ((c >> (16 - 8 * ch)) & 0xff) << shift;
			}
			uint8_t *p = data + (size_t)y * (size_t)img.bytes_per_line + (size_t)x * bytes;
			for (int b = 0; b < bytes; b++) {
				int idx = byte_order == LSBFirst ? b : bytes - 1 - b;
				p[idx] = (uint8_t)(v >> (8 * b));
			}
		}
	return img;
}

static int check_layout(int bpp, int order, unsigned long r, unsigned long g, unsigned long b)
{
	static uint8_t data[H * (W * 4 + 5)];
	struct x11_frame *f = x11_frame_create(W, H);
	XImage img = make_image(data, bpp, order, r, g, b);
	int wrong = 0, ret;

	REQUIRE(f);
	ret = x11_image_to_frame(&img, f);
	for (int y = 0; ret == 0 && y < H; y++)
		for (int x = 0; x < W; x++) {
			const uint8_t *p = f->pixels + (size_t)y * f->stride + (size_t)x * 3;
			wrong += ((uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]) != rgb_at(x, y);
		}
	x11_frame_destroy(f);
	return ret < 0 ? ret : wrong;
}

int main(void)
{
	/* The usual server: 32 bpp, BGRX in memory (the SSSE3 / bswap fast path). */
	CHECK_INT_EQ(check_layout(32, LSBFirst, 0xff0000, 0xff00, 0xff), 0);
	/* The same masks on a big-endian server: XRGB in memory. */
	CHECK_INT_EQ(check_layout(32, MSBFirst, 0xff0000, 0xff00, 0xff), 0);
	/* RGBX / XBGR masks. */
	CHECK_INT_EQ(check_layout(32, LSBFirst, 0xff, 0xff00, 0xff0000), 0);
	CHECK_INT_EQ(check_layout(32, LSBFirst, 0xff000000, 0xff0000, 0xff00), 0);
	/* Packed 24 bits per pixel, both byte orders. */
	CHECK_INT_EQ(check_layout(24, LSBFirst, 0xff0000, 0xff00, 0xff), 0);
	CHECK_INT_EQ(check_layout(24, MSBFirst, 0xff0000, 0xff00, 0xff), 0);
	/* Refused: 16-bit colour (5-6-5), 10-bit channels, no mask. */
	CHECK_INT_EQ(check_layout(16, LSBFirst, 0xf800, 0x07e0, 0x001f), -ENOTSUP);
	CHECK_INT_EQ(check_layout(32, LSBFirst, 0x3ff00000, 0xffc00, 0x3ff), -ENOTSUP);
	CHECK_INT_EQ(check_layout(32, LSBFirst, 0, 0xff00, 0xff), -ENOTSUP);
	return test_exit();
}
