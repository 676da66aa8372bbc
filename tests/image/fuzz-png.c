/* Fuzz target for the PNG decoder that takes images from outside (holo-infer --image, the
 * engine's image input): engine_image_decode_png on the whole input.
 *
 * Invariants (a violation aborts, so the fuzzer reports it like a crash): a decoded image is
 * inside ENGINE_IMAGE_MAX_DIM / ENGINE_IMAGE_MAX_PIXELS and all 3 * width * height bytes of its
 * pixels can be read (ASan checks the last one); a rejection sets errno to EINVAL, EFBIG or
 * ENOMEM and writes a sentence that starts with the buffer's name, "PNG"; no allocation is
 * larger than 1 GiB (checked under ASan).
 *
 * Built with libFuzzer by tools/fuzz/build.sh (docs/fuzzing.md). Without HOLOD_LIBFUZZER this
 * file builds a replay driver (the `unit` test fuzz-png-corpus): every file of the corpus
 * directory given as argv[1] must have the outcome its name promises (ok-*: decoded, bad-*:
 * rejected). `--write-seeds DIR` writes the seed corpus into DIR: small PNGs of every colour
 * type and bit depth (libpng), interlaced and not, and broken ones.
 */
#include <errno.h>
#include <png.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common.h"
#include "engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

/* Under ASan, an allocation far beyond what the largest image allowed needs (3 bytes for each of
 * ENGINE_IMAGE_MAX_PIXELS) is an error, so a decoder that sizes a buffer by a length field it has
 * not checked fails the replay even where the allocation would succeed. */
const char *__asan_default_options(void)
{
	return "max_allocation_size_mb=1024";
}

static int last_outcome; /* 1: decoded, 0: rejected */

static void check(bool cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "invariant violated: %s\n", what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512] = "";
	struct engine_image *img;

	errno = 0;
	img = engine_image_decode_png(data, size, err, sizeof(err));
	last_outcome = img != NULL;
	if (!img) {
		check(errno == EINVAL || errno == EFBIG || errno == ENOMEM,
		      "a rejection is EINVAL, EFBIG or ENOMEM");
		check(strncmp(err, "PNG: ", 5) == 0 && strlen(err) > 5, "a rejection says why");
		return 0;
	}
	int w = engine_image_width(img), h = engine_image_height(img);
	check(w >= 1 && h >= 1 && (unsigned)w <= ENGINE_IMAGE_MAX_DIM && (unsigned)h <= ENGINE_IMAGE_MAX_DIM &&
		      (uint64_t)w * (uint64_t)h <= ENGINE_IMAGE_MAX_PIXELS,
	      "a decoded image is inside the limits");
	const uint8_t *px = engine_image_rgb(img);
	volatile uint8_t first = px[0], last = px[(size_t)3 * (size_t)w * (size_t)h - 1];
	(void)first;
	(void)last;
	engine_image_destroy(img);
	return 0;
}

#ifndef HOLOD_LIBFUZZER
#include "fuzz-replay.h"

struct buf {
	uint8_t *data;
	size_t len;
};

static void buf_write(png_structp png, png_bytep data, size_t n)
{
	struct buf *b = png_get_io_ptr(png);

	b->data = realloc(b->data, b->len + n);
	check(b->data != NULL, "realloc");
	memcpy(b->data + b->len, data, n);
	b->len += n;
}

static void buf_flush(png_structp png)
{
}

/* A width x height PNG of colour type `type` and depth `depth` with patterned samples. */
static struct buf make_png(int width, int height, int type, int depth, bool interlace)
{
	struct buf b = {0};
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	int channels = type == PNG_COLOR_TYPE_RGB	 ? 3 :
		       type == PNG_COLOR_TYPE_RGBA	 ? 4 :
		       type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2 :
							   1;
	size_t row_bytes = ((size_t)width * (size_t)channels * (size_t)depth + 7) / 8;
	uint8_t *rows = malloc(row_bytes * (size_t)height);

	check(png && info && rows, "libpng write setup");
	for (size_t i = 0; i < row_bytes * (size_t)height; i++)
		rows[i] = (uint8_t)(i * 37 + 11);
	if (setjmp(png_jmpbuf(png)))
		check(false, "libpng write");
	png_set_write_fn(png, &b, buf_write, buf_flush);
	png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, depth, type,
		     interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
		     PNG_FILTER_TYPE_DEFAULT);
	if (type == PNG_COLOR_TYPE_PALETTE) {
		png_color pal[256];
		png_byte trns[4] = {0, 64, 128, 255};

		for (int i = 0; i < 256; i++)
			pal[i] = (png_color){(png_byte)i, (png_byte)(255 - i), (png_byte)(i * 7)};
		png_set_PLTE(png, info, pal, 1 << depth);
		png_set_tRNS(png, info, trns, depth == 1 ? 2 : 4, NULL);
	} else if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_RGB) {
		png_color_16 key = {.red = 1, .green = 1, .blue = 1, .gray = 1};

		png_set_tRNS(png, info, NULL, 0, &key);
	}
	png_write_info(png, info);
	int passes = png_set_interlace_handling(png);
	for (int p = 0; p < passes; p++) {
		for (int y = 0; y < height; y++)
			png_write_row(png, rows + (size_t)y * row_bytes);
	}
	png_write_end(png, info);
	png_destroy_write_struct(&png, &info);
	free(rows);
	return b;
}

static int write_file(const char *dir, const char *name, const uint8_t *data, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Rewrites IHDR's width and height (bytes 16..23 of a PNG) and its CRC (bytes 29..32). */
static void set_size(struct buf *b, uint32_t width, uint32_t height)
{
	put_be32(b->data + 16, width);
	put_be32(b->data + 20, height);
	put_be32(b->data + 29, (uint32_t)crc32(0, b->data + 12, 17));
}

static int write_seeds(const char *dir)
{
	static const struct {
		int type, depth;
		const char *name;
	} layouts[] = {
		{PNG_COLOR_TYPE_GRAY, 1, "grey1"},
		{PNG_COLOR_TYPE_GRAY, 2, "grey2"},
		{PNG_COLOR_TYPE_GRAY, 4, "grey4"},
		{PNG_COLOR_TYPE_GRAY, 8, "grey8"},
		{PNG_COLOR_TYPE_GRAY, 16, "grey16"},
		{PNG_COLOR_TYPE_GRAY_ALPHA, 8, "greya8"},
		{PNG_COLOR_TYPE_GRAY_ALPHA, 16, "greya16"},
		{PNG_COLOR_TYPE_PALETTE, 1, "pal1"},
		{PNG_COLOR_TYPE_PALETTE, 4, "pal4"},
		{PNG_COLOR_TYPE_PALETTE, 8, "pal8"},
		{PNG_COLOR_TYPE_RGB, 8, "rgb8"},
		{PNG_COLOR_TYPE_RGB, 16, "rgb16"},
		{PNG_COLOR_TYPE_RGBA, 8, "rgba8"},
		{PNG_COLOR_TYPE_RGBA, 16, "rgba16"},
	};
	char name[64];
	struct buf b;
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(layouts) && r == 0; i++) {
		for (int interlace = 0; interlace < 2 && r == 0; interlace++) {
			b = make_png(5 + (int)i % 3, 3 + interlace, layouts[i].type, layouts[i].depth,
				     interlace);
			snprintf(name, sizeof(name), "ok-%s%s", layouts[i].name, interlace ? "-adam7" : "");
			r = write_file(dir, name, b.data, b.len);
			free(b.data);
		}
	}
	b = make_png(4, 4, PNG_COLOR_TYPE_RGB, 8, false);
	if (r == 0)
		r = write_file(dir, "bad-empty", b.data, 0);
	if (r == 0)
		r = write_file(dir, "bad-signature-only", b.data, 8);
	if (r == 0)
		r = write_file(dir, "bad-truncated-idat", b.data, b.len - 20);
	b.data[b.len - 5] ^= 0xFF; /* the IEND CRC */
	if (r == 0)
		r = write_file(dir, "bad-iend-crc", b.data, b.len);
	b.data[b.len - 5] ^= 0xFF;
	b.data[0] = 'G';
	if (r == 0)
		r = write_file(dir, "bad-not-png", b.data, b.len);
	b.data[0] = 0x89;
	set_size(&b, ENGINE_IMAGE_MAX_DIM + 1, 1);
	if (r == 0)
		r = write_file(dir, "bad-too-wide", b.data, b.len);
	set_size(&b, 16384, 16384);
	if (r == 0)
		r = write_file(dir, "bad-too-many-pixels", b.data, b.len);
	set_size(&b, 4, 5000);
	if (r == 0)
		r = write_file(dir, "bad-rows-missing", b.data, b.len);
	free(b.data);
	return r < 0 ? 1 : 0;
}

static bool replay_one(const uint8_t *data, size_t size)
{
	LLVMFuzzerTestOneInput(data, size);
	return last_outcome;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
		return write_seeds(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR | --write-seeds DIR\n", argv[0]);
		return 2;
	}
	return fuzz_replay(argv[1], replay_one, 20);
}
#endif
