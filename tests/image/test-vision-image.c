/* Image input: PNG decoding of every colour type, corrupt and oversized PNGs, RGB frames from
 * memory, and the tile-grid choice of model.md 4.1. PNGs are written here with libpng so each
 * test knows exactly which pixels it must get back. */
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

/* ---- writing test PNGs ----------------------------------------------------------------------- */

struct buf {
	uint8_t *data;
	size_t len, cap;
};

static void buf_write(png_structp png, png_bytep data, size_t n)
{
	struct buf *b = png_get_io_ptr(png);

	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->data = realloc(b->data, b->cap);
		REQUIRE(b->data);
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
}

static void buf_flush(png_structp png)
{
}

struct png_spec {
	int width, height;
	int color_type; /* PNG_COLOR_TYPE_* */
	int bit_depth;
	bool interlace;
	const png_color *palette;
	int n_palette;
	const uint8_t *trns; /* palette alpha */
	int n_trns;
	const png_color_16 *trans_color; /* grey/RGB colour key */
};

/* Encodes `rows` (already in the PNG's own sample layout, 16-bit samples big-endian). */
static struct buf write_png(const struct png_spec *s, const uint8_t *samples, size_t row_bytes)
{
	struct buf b = {0};
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);

	REQUIRE(png && info);
	if (setjmp(png_jmpbuf(png)))
		REQUIRE(!"libpng write failed");
	png_set_write_fn(png, &b, buf_write, buf_flush);
	png_set_IHDR(png, info, (png_uint_32)s->width, (png_uint_32)s->height, s->bit_depth, s->color_type,
		     s->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
		     PNG_FILTER_TYPE_DEFAULT);
	if (s->palette)
		png_set_PLTE(png, info, s->palette, s->n_palette);
	if (s->trns || s->trans_color)
		png_set_tRNS(png, info, s->trns, s->n_trns, s->trans_color);
	png_write_info(png, info);
	{
		int passes = png_set_interlace_handling(png);

		for (int p = 0; p < passes; p++)
			for (int y = 0; y < s->height; y++)
				png_write_row(png, samples + (size_t)y * row_bytes);
	}
	png_write_end(png, info);
	png_destroy_write_struct(&png, &info);
	return b;
}

/* Deterministic RGB test pattern value for channel c at (x, y). */
static uint8_t pattern(int x, int y, int c)
{
	return (uint8_t)((x * 37 + y * 91 + c * 53 + x * y) & 0xff);
}

static struct engine_image *decode(const struct buf *b, char *err, size_t errlen)
{
	struct engine_image *img;

	err[0] = 0;
	img = engine_image_decode_png(b->data, b->len, err, errlen);
	if (!img)
		fprintf(stderr, "decode failed: %s\n", err);
	return img;
}

static void test_rgb_and_rgba(void)
{
	for (int alpha = 0; alpha <= 1; alpha++) {
		for (int interlace = 0; interlace <= 1; interlace++) {
			int w = 13, h = 7, ch = alpha ? 4 : 3;
			struct png_spec s = {w, h, alpha ? PNG_COLOR_TYPE_RGBA : PNG_COLOR_TYPE_RGB, 8,
					     interlace};
			uint8_t *px = malloc((size_t)w * h * ch);
			char err[256];
			struct engine_image *img;
			struct buf b;
			int bad = 0;

			for (int y = 0; y < h; y++)
				for (int x = 0; x < w; x++)
					for (int c = 0; c < ch; c++)
						px[(y * w + x) * ch + c] =
							c == 3 ? (uint8_t)(x * 20) : pattern(x, y, c);
			b = write_png(&s, px, (size_t)w * ch);
			img = decode(&b, err, sizeof(err));
			CHECK(img != NULL);
			if (img) {
				CHECK_INT_EQ(engine_image_width(img), w);
				CHECK_INT_EQ(engine_image_height(img), h);
				/* alpha is dropped, never composited */
				for (int y = 0; y < h; y++)
					for (int x = 0; x < w; x++)
						for (int c = 0; c < 3; c++)
							bad += engine_image_rgb(img)[(y * w + x) * 3 + c] !=
							       pattern(x, y, c);
				CHECK_INT_EQ(bad, 0);
			}
			engine_image_destroy(img);
			free(b.data);
			free(px);
		}
	}
}

static void test_grey(void)
{
	/* 1/2/4/8-bit grey scaled to 0..255 as PIL does (v * 255 / max), with a tRNS colour key
	 * that must not turn into anything; then 8-bit grey+alpha. */
	static const int depths[] = {1, 2, 4, 8};
	int w = 9, h = 5;

	for (size_t k = 0; k < ARRAY_SIZE(depths); k++) {
		int d = depths[k], max = (1 << d) - 1;
		png_color_16 key = {.gray = 1};
		struct png_spec s = {w, h, PNG_COLOR_TYPE_GRAY, d, .trans_color = &key};
		uint8_t rows[5][16] = {{0}};
		char err[256];
		struct engine_image *img;
		struct buf b;
		int bad = 0;

		for (int y = 0; y < h; y++)
			for (int x = 0; x < w; x++) {
				int v = (x + y * 3) % (max + 1);
				int bitpos = x * d;

				rows[y][bitpos / 8] |= (uint8_t)(v << (8 - d - bitpos % 8));
			}
		b = write_png(&s, &rows[0][0], sizeof(rows[0]));
		img = decode(&b, err, sizeof(err));
		CHECK(img != NULL);
		if (img) {
			for (int y = 0; y < h; y++)
				for (int x = 0; x < w; x++) {
					int v = (x + y * 3) % (max + 1);
					const uint8_t *p = engine_image_rgb(img) + (y * w + x) * 3;
					int want = v * 255 / max;

					bad += p[0] != want || p[1] != want || p[2] != want;
				}
			CHECK_INT_EQ(bad, 0);
		}
		engine_image_destroy(img);
		free(b.data);
	}

	{
		struct png_spec s = {w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8};
		uint8_t px[5 * 9 * 2];
		char err[256];
		struct engine_image *img;
		struct buf b;
		int bad = 0;

		for (int i = 0; i < w * h; i++) {
			px[i * 2] = (uint8_t)(i * 5);
			px[i * 2 + 1] = (uint8_t)(255 - i);
		}
		b = write_png(&s, px, (size_t)w * 2);
		img = decode(&b, err, sizeof(err));
		CHECK(img != NULL);
		if (img) {
			for (int i = 0; i < w * h; i++)
				for (int c = 0; c < 3; c++)
					bad += engine_image_rgb(img)[i * 3 + c] != (uint8_t)(i * 5);
			CHECK_INT_EQ(bad, 0);
		}
		engine_image_destroy(img);
		free(b.data);
	}
}

static void test_palette(void)
{
	/* 4-bit palette with a tRNS chunk: colours expanded, transparency ignored. */
	png_color pal[16];
	uint8_t trns[16];
	int w = 11, h = 6;
	uint8_t rows[6][8] = {{0}};
	struct png_spec s = {w, h, PNG_COLOR_TYPE_PALETTE, 4, false, pal, 16, trns, 16};
	char err[256];
	struct engine_image *img;
	struct buf b;
	int bad = 0;

	for (int i = 0; i < 16; i++) {
		pal[i] = (png_color){(png_byte)(i * 16), (png_byte)(255 - i * 7), (png_byte)(i * i)};
		trns[i] = (uint8_t)(i * 10);
	}
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			rows[y][x / 2] |= (uint8_t)(((x + y) % 16) << (x % 2 ? 0 : 4));
	b = write_png(&s, &rows[0][0], sizeof(rows[0]));
	img = decode(&b, err, sizeof(err));
	CHECK(img != NULL);
	if (img) {
		for (int y = 0; y < h; y++)
			for (int x = 0; x < w; x++) {
				const png_color *c = &pal[(x + y) % 16];
				const uint8_t *p = engine_image_rgb(img) + (y * w + x) * 3;

				bad += p[0] != c->red || p[1] != c->green || p[2] != c->blue;
			}
		CHECK_INT_EQ(bad, 0);
	}
	engine_image_destroy(img);
	free(b.data);
}

static void test_16bit(void)
{
	/* 16-bit RGBA and grey: the high byte of each sample is kept. */
	int w = 6, h = 4;
	uint8_t px[4 * 6 * 8];
	struct png_spec s = {w, h, PNG_COLOR_TYPE_RGB_ALPHA, 16};
	char err[256];
	struct engine_image *img;
	struct buf b;
	int bad = 0;

	for (int i = 0; i < w * h * 4; i++) {
		uint16_t v = (uint16_t)(i * 2741 + 129);

		px[i * 2] = (uint8_t)(v >> 8);
		px[i * 2 + 1] = (uint8_t)v;
	}
	b = write_png(&s, px, (size_t)w * 8);
	img = decode(&b, err, sizeof(err));
	CHECK(img != NULL);
	if (img) {
		for (int i = 0; i < w * h; i++)
			for (int c = 0; c < 3; c++)
				bad += engine_image_rgb(img)[i * 3 + c] != px[(i * 4 + c) * 2];
		CHECK_INT_EQ(bad, 0);
	}
	engine_image_destroy(img);
	free(b.data);

	s.color_type = PNG_COLOR_TYPE_GRAY;
	b = write_png(&s, px, (size_t)w * 2);
	img = decode(&b, err, sizeof(err));
	CHECK(img != NULL);
	if (img) {
		bad = 0;
		for (int i = 0; i < w * h; i++)
			for (int c = 0; c < 3; c++)
				bad += engine_image_rgb(img)[i * 3 + c] != px[i * 2];
		CHECK_INT_EQ(bad, 0);
	}
	engine_image_destroy(img);
	free(b.data);
}

/* ---- corrupt and oversized PNGs ---------------------------------------------------------------- */

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return c ^ 0xffffffffu;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Offset of the first chunk of `type` (its length field), or 0. */
static size_t find_chunk(const struct buf *b, const char *type)
{
	size_t off = 8;

	while (off + 12 <= b->len) {
		if (memcmp(b->data + off + 4, type, 4) == 0)
			return off;
		off += 12 + be32(b->data + off);
	}
	return 0;
}

static void fix_crc(struct buf *b, size_t chunk)
{
	uint32_t n = be32(b->data + chunk);

	put_be32(b->data + chunk + 8 + n, crc32_of(b->data + chunk + 4, n + 4));
}

static struct buf good_png(void)
{
	int w = 40, h = 30;
	struct png_spec s = {w, h, PNG_COLOR_TYPE_RGB, 8};
	uint8_t *px = malloc((size_t)w * h * 3);
	struct buf b;

	for (int i = 0; i < w * h * 3; i++)
		px[i] = (uint8_t)(i * 7 + i / 13);
	b = write_png(&s, px, (size_t)w * 3);
	free(px);
	return b;
}

static struct buf copy_buf(const struct buf *b)
{
	struct buf c = {malloc(b->len), b->len, b->len};

	REQUIRE(c.data);
	memcpy(c.data, b->data, b->len);
	return c;
}

/* Expects the decode to fail with `err` and a message containing `needle`. */
static void expect_fail(const struct buf *b, int want_errno, const char *needle)
{
	char msg[256];
	struct engine_image *img;

	msg[0] = 0;
	errno = 0;
	img = engine_image_decode_png(b->data, b->len, msg, sizeof(msg));
	CHECK(img == NULL);
	CHECK_INT_EQ(errno, want_errno);
	if (!strstr(msg, needle)) {
		fprintf(stderr, "message '%s' lacks '%s'\n", msg, needle);
		test_failures++;
	}
	engine_image_destroy(img);
}

static void test_corrupt(void)
{
	struct buf good = good_png(), b;
	size_t ihdr = find_chunk(&good, "IHDR"), idat = find_chunk(&good, "IDAT");
	size_t iend = find_chunk(&good, "IEND");
	char msg[256];
	struct engine_image *img;

	REQUIRE(ihdr && idat && iend);
	img = decode(&good, msg, sizeof(msg));
	CHECK(img != NULL);
	engine_image_destroy(img);

	b = copy_buf(&good);
	b.data[1] = 'J';
	expect_fail(&b, EINVAL, "not a PNG file");
	free(b.data);

	expect_fail(&(struct buf){good.data, 5, 5}, EINVAL, "not a PNG file");

	/* cut inside the pixel data, and just before IEND */
	expect_fail(&(struct buf){good.data, idat + 20, idat + 20}, EINVAL, "corrupt PNG");
	expect_fail(&(struct buf){good.data, iend, iend}, EINVAL, "truncated");

	/* critical chunk CRC */
	b = copy_buf(&good);
	b.data[ihdr + 8] ^= 0x40;
	expect_fail(&b, EINVAL, "CRC");
	free(b.data);

	/* a broken deflate stream with a valid CRC */
	b = copy_buf(&good);
	for (size_t i = 2; i < 12; i++)
		b.data[idat + 8 + i] ^= 0xa5;
	fix_crc(&b, idat);
	expect_fail(&b, EINVAL, "corrupt PNG");
	free(b.data);

	/* zero width */
	b = copy_buf(&good);
	put_be32(b.data + ihdr + 8, 0);
	fix_crc(&b, ihdr);
	expect_fail(&b, EINVAL, "corrupt PNG");
	free(b.data);

	/* over the per-side limit, and over the pixel limit with both sides allowed */
	b = copy_buf(&good);
	put_be32(b.data + ihdr + 8, ENGINE_IMAGE_MAX_DIM + 1);
	fix_crc(&b, ihdr);
	expect_fail(&b, EFBIG, "over the limit");
	put_be32(b.data + ihdr + 8, 10000);
	put_be32(b.data + ihdr + 12, 10000);
	fix_crc(&b, ihdr);
	expect_fail(&b, EFBIG, "over the limit");
	free(b.data);

	expect_fail(&(struct buf){good.data, (size_t)ENGINE_IMAGE_MAX_PNG_BYTES + 1, 0}, EFBIG,
		    "larger than the limit");
	free(good.data);
}

/* Random damage (bytes overwritten, CRCs repaired half of the time so the damage reaches zlib
 * and the pixel code): every decode must end in an image or an error message, and nothing may
 * leak or read out of bounds (run under ASan/UBSan in CI). */
static void test_mutations(void)
{
	struct buf good = good_png();
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int ok = 0, failed = 0;

	for (int iter = 0; iter < 400; iter++) {
		struct buf b = copy_buf(&good);
		int n = 1 + (int)(rng % 4);
		char msg[256];
		struct engine_image *img;

		for (int k = 0; k < n; k++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			/* a quarter of the time the header fields only (size, depth, colour type,
			 * interlace), which often still decodes */
			if (iter % 4 == 1)
				b.data[16 + (rng >> 33) % 13] = (uint8_t)(rng >> 17) % 8;
			else
				b.data[8 + (rng >> 33) % (b.len - 8)] = (uint8_t)(rng >> 17);
		}
		if (iter % 2) {
			size_t off = 8;

			while (off + 12 <= b.len && off + 12 + be32(b.data + off) <= b.len) {
				fix_crc(&b, off);
				off += 12 + be32(b.data + off);
			}
		}
		msg[0] = 0;
		img = engine_image_decode_png(b.data, b.len, msg, sizeof(msg));
		if (img) {
			ok++;
			CHECK(engine_image_width(img) >= 1 && engine_image_height(img) >= 1);
		} else {
			failed++;
			CHECK(msg[0] != 0);
		}
		engine_image_destroy(img);
		free(b.data);
	}
	printf("mutated PNGs: %d decoded, %d rejected\n", ok, failed);
	CHECK(failed > 0);
	free(good.data);
}

static void test_files(void)
{
	char dir[] = "/tmp/holo-vision-XXXXXX", path[64], msg[256];
	struct buf good = good_png();
	struct engine_image *img;
	int fd;

	REQUIRE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ok.png", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, good.data, good.len) == (ssize_t)good.len);
	close(fd);
	img = engine_image_load_png(path, msg, sizeof(msg));
	CHECK(img != NULL);
	if (img) {
		CHECK_INT_EQ(engine_image_width(img), 40);
		CHECK_INT_EQ(engine_image_height(img), 30);
		CHECK_INT_EQ(engine_image_rgb(img)[3 * 41 + 2],
			     (uint8_t)((3 * 41 + 2) * 7 + (3 * 41 + 2) / 13));
	}
	engine_image_destroy(img);

	/* A sparse file over the byte limit fails before anything is read. */
	snprintf(path, sizeof(path), "%s/huge.png", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, (off_t)ENGINE_IMAGE_MAX_PNG_BYTES + 1) == 0);
	close(fd);
	errno = 0;
	CHECK(engine_image_load_png(path, msg, sizeof(msg)) == NULL);
	CHECK_INT_EQ(errno, EFBIG);
	CHECK(strstr(msg, "huge.png") != NULL);
	unlink(path);

	snprintf(path, sizeof(path), "%s/missing.png", dir);
	errno = 0;
	CHECK(engine_image_load_png(path, msg, sizeof(msg)) == NULL);
	CHECK_INT_EQ(errno, ENOENT);
	errno = 0;
	CHECK(engine_image_load_png(dir, msg, sizeof(msg)) == NULL);
	CHECK_INT_EQ(errno, EINVAL);

	snprintf(path, sizeof(path), "%s/ok.png", dir);
	unlink(path);
	rmdir(dir);
	free(good.data);
}

static void test_from_rgb(void)
{
	uint8_t px[3 * 16];
	struct engine_image *img;

	for (int i = 0; i < (int)sizeof(px); i++)
		px[i] = (uint8_t)i;
	/* 3x2 with rows 16 bytes apart (7 bytes of padding) */
	img = engine_image_from_rgb(3, 2, 16, px);
	CHECK(img != NULL);
	if (img) {
		CHECK_INT_EQ(engine_image_rgb(img)[8], 8);
		CHECK_INT_EQ(engine_image_rgb(img)[9], 16);
		CHECK_INT_EQ(engine_image_rgb(img)[17], 24);
	}
	engine_image_destroy(img);
	engine_image_destroy(NULL);

	errno = 0;
	CHECK(engine_image_from_rgb(3, 2, 8, px) == NULL);
	CHECK_INT_EQ(errno, EINVAL);
	errno = 0;
	CHECK(engine_image_from_rgb(0, 2, 16, px) == NULL);
	CHECK_INT_EQ(errno, EINVAL);
	errno = 0;
	CHECK(engine_image_from_rgb(ENGINE_IMAGE_MAX_DIM + 1, 1, (size_t)3 * (ENGINE_IMAGE_MAX_DIM + 1),
				    px) == NULL);
	CHECK_INT_EQ(errno, EFBIG);
	errno = 0;
	CHECK(engine_image_from_rgb(10000, 10000, 30000, px) == NULL);
	CHECK_INT_EQ(errno, EFBIG);
}

/* ---- grid choice ------------------------------------------------------------------------------- */

static void test_grid(void)
{
	/* width, height, max_tiles -> cols, rows: model.md's examples first, then sizes around the
	 * equal-ratio rule (724 vs 725), extreme ratios and budgets, and random sizes; every
	 * expected grid comes from the reference's Python code (tools/make_vision_golden.py
	 * find_closest_aspect_ratio over its candidate list). */
	static const int cases[][5] = {
		{1920, 1080, 12, 4, 2}, {1280, 720, 12, 2, 1},	{1024, 768, 12, 4, 3},
		{512, 512, 12, 1, 1},	{1280, 800, 12, 3, 2},	{2560, 1440, 12, 4, 2},
		{3840, 2160, 12, 4, 2}, {1366, 768, 12, 4, 2},	{800, 600, 12, 4, 3},
		{600, 800, 12, 3, 4},	{100, 60, 12, 3, 2},	{100, 60, 2, 2, 1},
		{700, 300, 12, 5, 2},	{32, 32, 12, 1, 1},	{1, 1000, 12, 1, 12},
		{1000, 1, 12, 12, 1},	{1024, 1024, 12, 2, 2}, {1025, 1024, 12, 2, 2},
		{724, 724, 12, 1, 1},	{725, 725, 12, 2, 2},	{1536, 1024, 6, 3, 2},
		{1920, 1080, 4, 2, 1},	{1920, 1080, 1, 1, 1},	{3000, 1000, 12, 6, 2},
		{1000, 3000, 12, 2, 6}, {2048, 512, 12, 4, 1},	{5000, 100, 12, 12, 1},
		{640, 480, 3, 1, 1},	{1200, 1000, 7, 2, 2},	{4096, 2160, 24, 6, 3},
		{7680, 4320, 48, 9, 5}, {300, 2000, 48, 2, 13}, {1950, 4855, 9, 1, 3},
		{1069, 3031, 10, 1, 3}, {3884, 4759, 2, 1, 1},	{4962, 108, 8, 8, 1},
		{2125, 4513, 4, 1, 2},	{1571, 3853, 9, 1, 3},	{4503, 3903, 7, 2, 2},
		{1234, 1900, 11, 2, 3}, {1243, 4286, 7, 1, 4},	{125, 525, 3, 1, 3},
		{4843, 351, 5, 5, 1},	{255, 2208, 8, 1, 8},
	};
	struct engine_vision_grid g;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const int *c = cases[i];

		memset(&g, 0, sizeof(g));
		CHECK_INT_EQ(engine_vision_select_grid(c[0], c[1], 512, c[2], true, &g), 0);
		if (g.cols != c[3] || g.rows != c[4]) {
			fprintf(stderr, "grid for %dx%d max %d: got %dx%d, want %dx%d\n", c[0], c[1], c[2],
				g.cols, g.rows, c[3], c[4]);
			test_failures++;
		}
		CHECK_INT_EQ(g.thumbnail, g.cols * g.rows > 1);
		CHECK_INT_EQ(g.n_tiles, g.cols * g.rows + g.thumbnail);
	}

	/* model.md's counts: 8 tiles + thumbnail, 2 + thumbnail, 12 + thumbnail, 1 and none */
	CHECK_INT_EQ(engine_vision_select_grid(1920, 1080, 512, 12, true, &g), 0);
	CHECK_INT_EQ(g.n_tiles, 9);
	CHECK_INT_EQ(engine_vision_select_grid(1024, 768, 512, 12, true, &g), 0);
	CHECK_INT_EQ(g.n_tiles, 13);
	CHECK_INT_EQ(engine_vision_select_grid(512, 512, 512, 12, true, &g), 0);
	CHECK_INT_EQ(g.n_tiles, 1);
	CHECK(!g.thumbnail);
	CHECK_INT_EQ(engine_vision_select_grid(1920, 1080, 512, 12, false, &g), 0);
	CHECK_INT_EQ(g.n_tiles, 8);
	CHECK(!g.thumbnail);

	/* The equal-ratio rule scales with the tile size: 1024x1024 is 4 tiles of 512 but only
	 * one of 1024. */
	CHECK_INT_EQ(engine_vision_select_grid(1024, 1024, 1024, 12, true, &g), 0);
	CHECK_INT_EQ(g.cols * g.rows, 1);

	CHECK_INT_EQ(engine_vision_select_grid(0, 10, 512, 12, true, &g), -EINVAL);
	CHECK_INT_EQ(engine_vision_select_grid(10, 10, 512, 0, true, &g), -EINVAL);
	CHECK_INT_EQ(engine_vision_select_grid(10, 10, 512, ENGINE_VISION_MAX_TILES + 1, true, &g), -EINVAL);
	CHECK_INT_EQ(engine_vision_select_grid(10, 10, 0, 12, true, &g), -EINVAL);
}

int main(void)
{
	test_rgb_and_rgba();
	test_grey();
	test_palette();
	test_16bit();
	test_corrupt();
	test_mutations();
	test_files();
	test_from_rgb();
	test_grid();
	return test_exit();
}
