/* x11 PNG encoding of frames (libpng), tuned for speed: screenshots go to a model every step. */
#include "common.h"
#include "x11-internal.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* zlib level 1 with the SUB filter: about as small as level 6 on screen content (flat areas and
 * text) at a fraction of the time. */
#define PNG_LEVEL 1

struct membuf {
	uint8_t *data;
	size_t size, cap;
	bool oom;
};

static void mem_write(png_structp png, png_bytep data, png_size_t len)
{
	struct membuf *m = png_get_io_ptr(png);
	size_t need;

	if (m->oom)
		return;
	if (!size_add_ok(m->size, len, &need))
		need = SIZE_MAX;
	if (need > m->cap) {
		size_t cap = MAX(m->cap * 2, MAX(need, (size_t)64 * 1024));
		uint8_t *p = realloc(m->data, cap);
		if (!p) {
			m->oom = true;
			png_error(png, "out of memory");
		}
		m->data = p;
		m->cap = cap;
	}
	memcpy(m->data + m->size, data, len);
	m->size += len;
}

static void mem_flush(png_structp png)
{
}

static void png_warn(png_structp png, png_const_charp msg)
{
	log_debug("libpng: %s", msg);
}

static void png_err(png_structp png, png_const_charp msg)
{
	log_debug("libpng: %s", msg);
	png_longjmp(png, 1);
}

/* Writes f through either a memory sink (m != NULL) or a FILE. */
static int encode(const struct x11_frame *f, struct membuf *m, FILE *file)
{
	png_structp png;
	png_infop info;

	if (!f || !f->pixels || f->width <= 0 || f->height <= 0 || f->stride < (size_t)f->width * 3)
		return -EINVAL;
	png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, png_err, png_warn);
	if (!png)
		return -ENOMEM;
	info = png_create_info_struct(png);
	if (!info) {
		png_destroy_write_struct(&png, NULL);
		return -ENOMEM;
	}
	if (setjmp(png_jmpbuf(png))) {
		bool oom = m && m->oom;
		png_destroy_write_struct(&png, &info);
		return oom ? -ENOMEM : -EIO;
	}
	if (m)
		png_set_write_fn(png, m, mem_write, mem_flush);
	else
		png_init_io(png, file);
	png_set_compression_level(png, PNG_LEVEL);
	png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
	png_set_IHDR(png, info, (png_uint_32)f->width, (png_uint_32)f->height, 8, PNG_COLOR_TYPE_RGB,
		     PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
	png_write_info(png, info);
	for (int y = 0; y < f->height; y++)
		png_write_row(png, f->pixels + (size_t)y * f->stride);
	png_write_end(png, info);
	png_destroy_write_struct(&png, &info);
	return 0;
}

int x11_frame_encode_png(const struct x11_frame *f, uint8_t **ret_data, size_t *ret_size)
{
	struct membuf m = {0};
	int r = encode(f, &m, NULL);

	if (r < 0) {
		free(m.data);
		return r;
	}
	*ret_data = m.data;
	*ret_size = m.size;
	return 0;
}

int x11_frame_write_png(const struct x11_frame *f, const char *path)
{
	FILE *file = fopen(path, "wbe");
	int r;

	if (!file)
		return -errno;
	r = encode(f, NULL, file);
	if (fclose(file) != 0 && r == 0)
		r = -errno;
	if (r < 0)
		unlink(path);
	return r;
}
