/* Unit: PNG encoding round trip through libpng's decoder (no display). */
#include "common.h"
#include "test.h"
#include "x11.h"

#include <png.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

static void fill(struct x11_frame *f)
{
	for (int y = 0; y < f->height; y++)
		for (int x = 0; x < f->width; x++) {
			uint8_t *p = f->pixels + (size_t)y * f->stride + (size_t)x * 3;
			p[0] = (uint8_t)(x * 7 + y);
			p[1] = (uint8_t)(y * 3);
			p[2] = (uint8_t)(x ^ y);
		}
}

static void check_decoded(const uint8_t *data, size_t size, const struct x11_frame *f)
{
	png_image img = {.version = PNG_IMAGE_VERSION};

	REQUIRE(png_image_begin_read_from_memory(&img, data, size));
	CHECK_INT_EQ(img.width, (unsigned)f->width);
	CHECK_INT_EQ(img.height, (unsigned)f->height);
	CHECK_INT_EQ(img.format, PNG_FORMAT_RGB);
	img.format = PNG_FORMAT_RGB;
	uint8_t *out = xmalloc(PNG_IMAGE_SIZE(img));
	REQUIRE(png_image_finish_read(&img, NULL, out, 0, NULL));
	int diff = 0;
	for (int y = 0; y < f->height; y++)
		diff += memcmp(out + (size_t)y * (size_t)f->width * 3, f->pixels + (size_t)y * f->stride,
			       (size_t)f->width * 3) != 0;
	CHECK_INT_EQ(diff, 0);
	free(out);
}

int main(void)
{
	struct x11_frame *f = x11_frame_create(97, 61);
	uint8_t *data = NULL;
	size_t size = 0;

	REQUIRE(f);
	CHECK(f->stride >= (size_t)f->width * 3);
	fill(f);
	CHECK_INT_EQ(x11_frame_encode_png(f, &data, &size), 0);
	REQUIRE(data && size > 8);
	CHECK(memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0);
	check_decoded(data, size, f);
	free(data);

	/* A frame with padding at the end of its rows (stride > 3 * width). */
	struct x11_frame padded = {.width = 10, .height = 4, .stride = 40};
	padded.pixels = xcalloc(padded.stride * 4, 1);
	fill(&padded);
	CHECK_INT_EQ(x11_frame_encode_png(&padded, &data, &size), 0);
	check_decoded(data, size, &padded);
	free(data);
	free(padded.pixels);

	/* Written to a file: the same bytes. */
	char path[] = "/tmp/holo-x11-png-XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	CHECK_INT_EQ(x11_frame_write_png(f, path), 0);
	FILE *file = fopen(path, "rb");
	REQUIRE(file);
	uint8_t buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf), file);
	fclose(file);
	unlink(path);
	check_decoded(buf, n, f);
	CHECK_INT_EQ(x11_frame_write_png(f, "/nonexistent-dir/x.png"), -ENOENT);

	/* Invalid frames and sizes. */
	struct x11_frame bad = {.width = 10, .height = 4, .stride = 20, .pixels = buf};
	CHECK_INT_EQ(x11_frame_encode_png(&bad, &data, &size), -EINVAL);
	CHECK(x11_frame_create(0, 10) == NULL);
	CHECK(x11_frame_create(10, -1) == NULL);
	x11_frame_destroy(NULL);
	x11_frame_destroy(f);
	return test_exit();
}
