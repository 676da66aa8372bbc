/* engine: images from PNG files/buffers (libpng) and from RGB frames in memory.
 *
 * libpng reports errors by calling an error function that must not return; ours records the
 * message and longjmp()s back into the decoder, which then frees everything it holds. Every
 * local the decoder changes after setjmp() and still reads after the jump is volatile.
 */
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "image.h"

static void set_error(char *errbuf, size_t errlen, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static void set_error(char *errbuf, size_t errlen, const char *format, ...)
{
	va_list ap;

	if (!errbuf || errlen == 0)
		return;
	va_start(ap, format);
	vsnprintf(errbuf, errlen, format, ap);
	va_end(ap);
}

struct engine_image *image_alloc(int width, int height)
{
	struct engine_image *img;
	size_t n;

	if (width < 1 || height < 1) {
		errno = EINVAL;
		return NULL;
	}
	if ((unsigned)width > ENGINE_IMAGE_MAX_DIM || (unsigned)height > ENGINE_IMAGE_MAX_DIM ||
	    (uint64_t)width * (uint64_t)height > ENGINE_IMAGE_MAX_PIXELS) {
		errno = EFBIG;
		return NULL;
	}
	n = (size_t)width * (size_t)height * 3;
	img = calloc(1, sizeof(*img));
	if (!img)
		goto fail;
	img->rgb = malloc(n);
	if (!img->rgb)
		goto fail;
	img->width = width;
	img->height = height;
	return img;
fail:
	free(img);
	errno = ENOMEM;
	return NULL;
}

void engine_image_destroy(struct engine_image *img)
{
	if (!img)
		return;
	free(img->rgb);
	free(img);
}

int engine_image_width(const struct engine_image *img)
{
	return img->width;
}

int engine_image_height(const struct engine_image *img)
{
	return img->height;
}

const uint8_t *engine_image_rgb(const struct engine_image *img)
{
	return img->rgb;
}

struct engine_image *engine_image_from_rgb(int width, int height, size_t stride, const uint8_t *pixels)
{
	struct engine_image *img;
	size_t row;

	if (!pixels || width < 1 || height < 1 || stride / 3 < (size_t)width) {
		errno = EINVAL;
		return NULL;
	}
	img = image_alloc(width, height);
	if (!img)
		return NULL;
	row = (size_t)width * 3;
	for (int y = 0; y < height; y++)
		memcpy(img->rgb + (size_t)y * row, pixels + (size_t)y * stride, row);
	return img;
}

/* ---- PNG ---------------------------------------------------------------------------------- */

/* Ancillary chunks that libpng reads whole into a buffer of the size their length field
 * claims, up to 2^31 - 1, before reading them (libpng 1.6.39 does not apply
 * png_set_chunk_malloc_max to these): a 571-byte file with an sPLT chunk made it allocate
 * 1.9 GB. None of them changes the RGB pixels (text, ICC profile, suggested palettes, EXIF,
 * calibration, scale), so they are skipped unread, like unknown chunks. */
static const png_byte png_ignored_chunks[] = "iCCP\0sPLT\0tEXt\0zTXt\0iTXt\0eXIf\0pCAL\0sCAL";

struct png_source {
	const uint8_t *data;
	size_t len;
	size_t pos;
	char message[200]; /* libpng's last error */
	jmp_buf jmp;
};

static void png_error_fn(png_structp png, png_const_charp msg)
{
	struct png_source *src = png_get_error_ptr(png);

	snprintf(src->message, sizeof(src->message), "%s", msg ? msg : "unknown error");
	longjmp(src->jmp, 1);
}

/* Warnings (bad ancillary chunks, which libpng skips) do not stop decoding. */
static void png_warning_fn(png_structp png, png_const_charp msg)
{
}

static void png_read_fn(png_structp png, png_bytep out, size_t n)
{
	struct png_source *src = png_get_io_ptr(png);

	if (n > src->len - src->pos)
		png_error(png, "file is truncated");
	memcpy(out, src->data + src->pos, n);
	src->pos += n;
}

/* Decodes `data`; `name` prefixes error messages ("PNG" for buffers, the path for files). */
static struct engine_image *decode_png(const uint8_t *data, size_t len, const char *name, char *errbuf,
				       size_t errlen)
{
	struct png_source src = {.data = data, .len = len};
	png_structp png = NULL;
	png_infop info = NULL;
	struct engine_image *volatile img = NULL;
	png_bytep *volatile rows = NULL;
	volatile int err = EINVAL;
	png_uint_32 width, height;
	int bit_depth, color_type;

	if (len > ENGINE_IMAGE_MAX_PNG_BYTES) {
		set_error(errbuf, errlen, "%s: PNG of %zu bytes is larger than the limit of %u bytes", name,
			  len, ENGINE_IMAGE_MAX_PNG_BYTES);
		errno = EFBIG;
		return NULL;
	}
	if (len < 8 || png_sig_cmp(data, 0, 8) != 0) {
		set_error(errbuf, errlen, "%s: not a PNG file (bad signature)", name);
		errno = EINVAL;
		return NULL;
	}
	png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_error_fn, png_warning_fn);
	if (png)
		info = png_create_info_struct(png);
	if (!png || !info) {
		png_destroy_read_struct(&png, NULL, NULL);
		set_error(errbuf, errlen, "%s: out of memory", name);
		errno = ENOMEM;
		return NULL;
	}
	if (setjmp(src.jmp)) {
		set_error(errbuf, errlen, "%s: corrupt PNG: %s", name, src.message);
		goto fail;
	}
	png_set_read_fn(png, &src, png_read_fn);
	/* Our own limits below give EFBIG; libpng's would only say "exceeds user limit". */
	png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
	png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, png_ignored_chunks,
				    (int)(sizeof(png_ignored_chunks) / 5));
	png_read_info(png, info);
	png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, NULL, NULL, NULL);
	if (width > ENGINE_IMAGE_MAX_DIM || height > ENGINE_IMAGE_MAX_DIM ||
	    (uint64_t)width * height > ENGINE_IMAGE_MAX_PIXELS) {
		set_error(errbuf, errlen,
			  "%s: image of %ux%u pixels is over the limit (%u per side, %u in all)", name,
			  (unsigned)width, (unsigned)height, ENGINE_IMAGE_MAX_DIM, ENGINE_IMAGE_MAX_PIXELS);
		err = EFBIG;
		goto fail;
	}

	if (bit_depth == 16)
		png_set_strip_16(png); /* high byte, as PIL's "RGB;16B" raw modes */
	if (color_type == PNG_COLOR_TYPE_PALETTE)
		png_set_palette_to_rgb(png);
	if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8)
		png_set_expand_gray_1_2_4_to_8(png);
	/* Also for tRNS: the expansions above turn it into an alpha channel. */
	png_set_strip_alpha(png);
	if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA)
		png_set_gray_to_rgb(png);
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8 ||
	    png_get_rowbytes(png, info) != (size_t)width * 3) {
		set_error(errbuf, errlen, "%s: PNG layout (colour type %d, depth %d) not converted to RGB",
			  name, color_type, bit_depth);
		goto fail;
	}

	img = image_alloc((int)width, (int)height);
	rows = malloc(sizeof(*rows) * height);
	if (!img || !rows) {
		set_error(errbuf, errlen, "%s: out of memory for %ux%u pixels", name, (unsigned)width,
			  (unsigned)height);
		err = ENOMEM;
		goto fail;
	}
	for (png_uint_32 y = 0; y < height; y++)
		rows[y] = img->rgb + (size_t)y * width * 3;
	png_read_image(png, rows);
	/* Reads up to IEND, so a file cut after the pixel data is rejected too. */
	png_read_end(png, NULL);

	png_destroy_read_struct(&png, &info, NULL);
	free(rows);
	return img;
fail:
	png_destroy_read_struct(&png, &info, NULL);
	free(rows);
	engine_image_destroy(img);
	errno = err;
	return NULL;
}

struct engine_image *engine_image_decode_png(const void *data, size_t len, char *errbuf, size_t errlen)
{
	if (!data) {
		set_error(errbuf, errlen, "PNG: no data");
		errno = EINVAL;
		return NULL;
	}
	return decode_png(data, len, "PNG", errbuf, errlen);
}

struct engine_image *engine_image_load_png(const char *path, char *errbuf, size_t errlen)
{
	struct engine_image *img = NULL;
	uint8_t *buf = NULL;
	struct stat st;
	size_t len, got = 0;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		set_error(errbuf, errlen, "%s: %s", path, strerror(err));
		errno = err;
		return NULL;
	}
	if (fstat(fd, &st) < 0) {
		err = errno;
		set_error(errbuf, errlen, "%s: %s", path, strerror(err));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = EINVAL;
		set_error(errbuf, errlen, "%s: not a regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size > ENGINE_IMAGE_MAX_PNG_BYTES) {
		err = EFBIG;
		set_error(errbuf, errlen, "%s: file of %lld bytes is larger than the limit of %u bytes", path,
			  (long long)st.st_size, ENGINE_IMAGE_MAX_PNG_BYTES);
		goto out;
	}
	len = (size_t)st.st_size;
	buf = malloc(len ? len : 1);
	if (!buf) {
		err = ENOMEM;
		set_error(errbuf, errlen, "%s: out of memory", path);
		goto out;
	}
	while (got < len) {
		ssize_t r = read(fd, buf + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = errno;
			set_error(errbuf, errlen, "%s: %s", path, strerror(err));
			goto out;
		}
		if (r == 0)
			break; /* shrank while we read: decode what is there */
		got += (size_t)r;
	}
	img = decode_png(buf, got, path, errbuf, errlen);
	err = img ? 0 : errno;
out:
	free(buf);
	close(fd);
	if (!img)
		errno = err;
	return img;
}
