/* x11 capture: MIT-SHM XShmGetImage with an XGetImage fallback, converted to packed RGB. */
#include "common.h"
#include "x11-internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

struct x11_frame *x11_frame_create(int width, int height)
{
	size_t stride, size;
	struct x11_frame *f;

	if (width <= 0 || height <= 0 || !size_mul_ok((size_t)width, 3, &stride) ||
	    !size_mul_ok(stride, (size_t)height, &size)) {
		errno = EINVAL;
		return NULL;
	}
	f = xcalloc(1, sizeof(*f));
	/* Image-sized: may be large, so a failure is an error, not an abort. */
	f->pixels = malloc(size);
	if (!f->pixels) {
		free(f);
		errno = ENOMEM;
		return NULL;
	}
	f->width = width;
	f->height = height;
	f->stride = stride;
	return f;
}

void x11_frame_destroy(struct x11_frame *f)
{
	if (!f)
		return;
	free(f->pixels);
	free(f);
}

void x11_capture_set_shm(struct x11_display *d, bool enable)
{
	d->shm_enabled = enable;
	if (!enable)
		x11_capture_release(d);
}

bool x11_capture_uses_shm(const struct x11_display *d)
{
	return d->shm_enabled && d->shm_available;
}

void x11_capture_release(struct x11_display *d)
{
	if (!d->shm_image)
		return;
	XShmDetach(d->dpy, &d->shm_info);
	XSync(d->dpy, False);
	XDestroyImage(d->shm_image); /* frees the XImage, not the segment */
	shmdt(d->shm_info.shmaddr);
	d->shm_image = NULL;
	d->shm_w = d->shm_h = 0;
}

/* (Re)creates the attached segment for w x h. On failure SHM is marked unavailable for this
 * connection (a remote server cannot attach our segment: BadAccess) and the caller falls back. */
static int shm_prepare(struct x11_display *d, int w, int h)
{
	Visual *vis = DefaultVisual(d->dpy, d->screen);
	int depth = DefaultDepth(d->dpy, d->screen);
	XImage *img;
	size_t size;
	int xerr;

	if (d->shm_image && d->shm_w == w && d->shm_h == h)
		return 0;
	x11_capture_release(d);
	img = XShmCreateImage(d->dpy, vis, (unsigned)depth, ZPixmap, NULL, &d->shm_info, (unsigned)w,
			      (unsigned)h);
	if (!img)
		goto unavailable;
	size = (size_t)img->bytes_per_line * (size_t)img->height;
	d->shm_info.shmid = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
	if (d->shm_info.shmid < 0) {
		log_debug("shmget(%zu): %m", size);
		goto destroy_image;
	}
	d->shm_info.shmaddr = img->data = shmat(d->shm_info.shmid, NULL, 0);
	if (d->shm_info.shmaddr == (char *)-1) {
		log_debug("shmat: %m");
		shmctl(d->shm_info.shmid, IPC_RMID, NULL);
		goto destroy_image;
	}
	d->shm_info.readOnly = False;
	x11_trap_begin();
	XShmAttach(d->dpy, &d->shm_info);
	xerr = x11_trap_end(d->dpy);
	/* Marked for removal now: it disappears when both sides detach, even if we crash. */
	shmctl(d->shm_info.shmid, IPC_RMID, NULL);
	if (xerr || d->lost) {
		log_debug("XShmAttach failed (X error %d): falling back to XGetImage", xerr);
		shmdt(d->shm_info.shmaddr);
		goto destroy_image;
	}
	d->shm_image = img;
	d->shm_w = w;
	d->shm_h = h;
	return 0;

destroy_image:
	img->data = NULL;
	XDestroyImage(img);
unavailable:
	d->shm_available = false;
	return -EIO;
}

static int mask_shift(unsigned long mask, int *ret_shift)
{
	int shift = 0;

	if (!mask)
		return -ENOTSUP;
	while (!(mask & 1)) {
		mask >>= 1;
		shift++;
	}
	/* Only 8-bit channels: 24-bit colour in 24 or 32 bits per pixel. */
	if (mask != 0xff)
		return -ENOTSUP;
	*ret_shift = shift;
	return 0;
}

/* One row of 32-bit little-endian BGRX (the usual X server layout) to RGB. */
static void row_bgrx_portable(const uint8_t *src, uint8_t *dst, int width)
{
	int x = 0;

	/* Four bytes stored per pixel, three kept: the fourth is overwritten by the next pixel,
	 * so the last pixel of the row is written byte by byte. */
	for (; x + 1 < width; x++) {
		uint32_t p;
		memcpy(&p, src, 4);
		p = __builtin_bswap32(p) >> 8; /* 0x00BBGGRR: bytes R, G, B, 0 in memory */
		memcpy(dst, &p, 4);
		src += 4;
		dst += 3;
	}
	for (; x < width; x++) {
		dst[0] = src[2];
		dst[1] = src[1];
		dst[2] = src[0];
		src += 4;
		dst += 3;
	}
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* SSSE3: one shuffle turns four BGRX pixels into twelve RGB bytes. The 16-byte store writes four
 * bytes past them, so it runs only while at least six pixels (18 bytes) remain in the row. */
__attribute__((target("ssse3"))) static void row_bgrx_ssse3(const uint8_t *src, uint8_t *dst, int width)
{
	const __m128i shuf = _mm_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
	int x = 0;

	for (; x + 6 <= width; x += 4) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)src);
		_mm_storeu_si128((__m128i *)(void *)dst, _mm_shuffle_epi8(v, shuf));
		src += 16;
		dst += 12;
	}
	row_bgrx_portable(src, dst, width - x);
}
#endif

typedef void (*row_fn)(const uint8_t *src, uint8_t *dst, int width);

static row_fn pick_row_bgrx(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (__builtin_cpu_supports("ssse3"))
		return row_bgrx_ssse3;
#endif
	return row_bgrx_portable;
}

int x11_image_to_frame(const XImage *img, struct x11_frame *f)
{
	int rs, gs, bs, bpp = img->bits_per_pixel;

	if (mask_shift(img->red_mask, &rs) < 0 || mask_shift(img->green_mask, &gs) < 0 ||
	    mask_shift(img->blue_mask, &bs) < 0 || (bpp != 32 && bpp != 24))
		return -ENOTSUP;
	bool lsb = img->byte_order == LSBFirst;
	/* Byte index of each channel inside a pixel, from the masks and the image byte order. */
	int bytes = bpp / 8;
	int ri = lsb ? rs / 8 : bytes - 1 - rs / 8;
	int gi = lsb ? gs / 8 : bytes - 1 - gs / 8;
	int bi = lsb ? bs / 8 : bytes - 1 - bs / 8;
	row_fn fast = bytes == 4 && ri == 2 && gi == 1 && bi == 0 ? pick_row_bgrx() : NULL;

	for (int y = 0; y < f->height; y++) {
		const uint8_t *src = (const uint8_t *)img->data + (size_t)y * img->bytes_per_line;
		uint8_t *dst = f->pixels + (size_t)y * f->stride;

		if (fast) {
			fast(src, dst, f->width);
			continue;
		}
		for (int x = 0; x < f->width; x++) {
			dst[0] = src[ri];
			dst[1] = src[gi];
			dst[2] = src[bi];
			src += bytes;
			dst += 3;
		}
	}
	return 0;
}

static int check_visual(struct x11_display *d)
{
	Visual *vis = DefaultVisual(d->dpy, d->screen);
	int depth = DefaultDepth(d->dpy, d->screen);

	if (vis->class != TrueColor || (depth != 24 && depth != 32)) {
		log_debug("unsupported visual: class %d depth %d", vis->class, depth);
		return -ENOTSUP;
	}
	return 0;
}

/* Grabs r into `out`, whose buffer is large enough. */
static int grab(struct x11_display *d, const struct x11_rect *r, struct x11_frame *out)
{
	XImage *img;
	int ret;

	if (x11_capture_uses_shm(d) && shm_prepare(d, r->width, r->height) == 0) {
		x11_trap_begin();
		Bool ok = XShmGetImage(d->dpy, d->root, d->shm_image, r->x, r->y, AllPlanes);
		int xerr = x11_trap_peek();
		if (d->lost)
			return -ECONNRESET;
		if (ok && !xerr)
			return x11_image_to_frame(d->shm_image, out);
		log_debug("XShmGetImage failed (X error %d): falling back to XGetImage", xerr);
		x11_capture_release(d);
		d->shm_available = false;
	}
	x11_trap_begin();
	img = XGetImage(d->dpy, d->root, r->x, r->y, (unsigned)r->width, (unsigned)r->height, AllPlanes,
			ZPixmap);
	int xerr = x11_trap_peek();
	if (d->lost) {
		if (img)
			XDestroyImage(img);
		return -ECONNRESET;
	}
	if (!img || xerr) {
		log_debug("XGetImage failed (X error %d)", xerr);
		if (img)
			XDestroyImage(img);
		return -EIO;
	}
	ret = x11_image_to_frame(img, out);
	XDestroyImage(img);
	return ret;
}

int x11_capture_into(struct x11_display *d, const struct x11_rect *area, struct x11_frame *frame)
{
	struct x11_rect r = area ? *area : (struct x11_rect){0, 0, d->width, d->height};
	int ret;

	if (d->lost)
		return -ECONNRESET;
	if (r.width <= 0 || r.height <= 0 || r.x < 0 || r.y < 0 || r.x > d->width - r.width ||
	    r.y > d->height - r.height)
		return -ERANGE;
	ret = check_visual(d);
	if (ret < 0)
		return ret;

	/* The frame's geometry changes only on success; its buffer may grow either way. */
	struct x11_frame out = {r.width, r.height, (size_t)r.width * 3, frame->pixels};
	size_t size = out.stride * (size_t)r.height;
	if (!out.pixels || frame->stride * (size_t)frame->height < size) {
		uint8_t *p = realloc(frame->pixels, size);
		if (!p)
			return -ENOMEM;
		frame->pixels = out.pixels = p;
	}
	ret = grab(d, &r, &out);
	if (ret < 0)
		return ret;
	*frame = out;
	return 0;
}

int x11_capture(struct x11_display *d, const struct x11_rect *area, struct x11_frame **ret)
{
	struct x11_frame *f = xcalloc(1, sizeof(*f));
	int r = x11_capture_into(d, area, f);

	if (r < 0) {
		x11_frame_destroy(f);
		return r;
	}
	*ret = f;
	return 0;
}
