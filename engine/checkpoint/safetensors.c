/* safetensors: parse the header of one file and hand out tensors that point into its map.
 *
 * Format: u64 little-endian header length n, n bytes of JSON {name: {dtype, shape,
 * data_offsets: [begin, end]}, "__metadata__": {...}}, then the data section; offsets are
 * relative to the data section. Everything in the header is untrusted: each number is checked
 * against the file size or a named limit (loader.h) before use, and nothing is copied but names.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "loader.h"

int st_errorf(char *errbuf, size_t errlen, int err, const char *format, ...)
{
	va_list ap;

	if (errbuf && errlen > 0) {
		va_start(ap, format);
		vsnprintf(errbuf, errlen, format, ap);
		va_end(ap);
	}
	return err;
}

static const struct {
	const char *name;
	enum tensor_dtype dtype;
	size_t size;
} supported_dtypes[] = {
	{"BF16", TENSOR_BF16, 2},	{"F16", TENSOR_F16, 2}, {"F32", TENSOR_F32, 4},
	{"U8", TENSOR_U8, 1},		/* a holod-quantized checkpoint's row records (quantized.c) */
	{"F8_E4M3", TENSOR_F8_E4M3, 1}, /* NVIDIA ModelOpt FP8 weights (modelopt.h) */
};

size_t st_dtype_size(enum tensor_dtype dtype)
{
	for (size_t i = 0; i < ARRAY_SIZE(supported_dtypes); i++)
		if (supported_dtypes[i].dtype == dtype)
			return supported_dtypes[i].size;
	return 0;
}

const char *st_dtype_name(enum tensor_dtype dtype)
{
	for (size_t i = 0; i < ARRAY_SIZE(supported_dtypes); i++)
		if (supported_dtypes[i].dtype == dtype)
			return supported_dtypes[i].name;
	return NULL;
}

void st_file_destroy(struct st_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_entries; i++)
		free((char *)f->entries[i].name);
	free(f->entries);
	if (f->mapped && f->size > 0)
		munmap((void *)f->base, f->size);
	free(f);
}

static int entry_cmp_name(const void *a, const void *b)
{
	const struct st_entry *x = a, *y = b;
	return strcmp(x->name, y->name);
}

static int entry_cmp_offset(const void *a, const void *b)
{
	const struct st_entry *x = *(const struct st_entry *const *)a;
	const struct st_entry *y = *(const struct st_entry *const *)b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

static bool name_ok(const char *name, size_t len)
{
	if (len == 0 || len > ST_MAX_NAME_BYTES)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return false;
	return true;
}

/* Reads a JSON integer in [0, max]. */
static bool json_u64(const json_t *v, uint64_t max, uint64_t *ret)
{
	json_int_t x;

	if (!json_is_integer(v))
		return false;
	x = json_integer_value(v);
	if (x < 0 || (uint64_t)x > max)
		return false;
	*ret = (uint64_t)x;
	return true;
}

/* Fills e from one header entry; data_len is the size of the data section. */
static int parse_entry(const char *name, const json_t *obj, uint64_t data_len, struct st_entry *e,
		       char *errbuf, size_t errlen)
{
	const json_t *dtype, *shape, *offsets;
	const char *dname;
	size_t esize = 0, n_elems = 1, nbytes, i;

	if (!json_is_object(obj))
		return st_errorf(errbuf, errlen, -EINVAL, "tensor '%s': header entry is not an object", name);
	dtype = json_object_get(obj, "dtype");
	shape = json_object_get(obj, "shape");
	offsets = json_object_get(obj, "data_offsets");
	if (!json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offsets))
		return st_errorf(errbuf, errlen, -EINVAL,
				 "tensor '%s': header entry needs a string 'dtype', an array 'shape' and an "
				 "array 'data_offsets'",
				 name);

	dname = json_string_value(dtype);
	for (i = 0; i < ARRAY_SIZE(supported_dtypes); i++) {
		if (strcmp(dname, supported_dtypes[i].name) == 0) {
			e->t.dtype = supported_dtypes[i].dtype;
			esize = supported_dtypes[i].size;
			break;
		}
	}
	if (esize == 0)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"tensor '%s' has unsupported dtype '%.32s' (supported: BF16, F16, F32, U8, F8_E4M3)",
			name, dname);

	if (json_array_size(shape) > TENSOR_MAX_DIMS)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "tensor '%s' has %zu dimensions (at most %d supported)", name,
				 json_array_size(shape), TENSOR_MAX_DIMS);
	e->t.ndim = (int)json_array_size(shape);
	for (i = 0; i < (size_t)e->t.ndim; i++) {
		uint64_t d;

		/* A dimension larger than the file cannot be backed by data unless another one is 0;
		 * data_len also bounds it well below INT64_MAX. */
		if (!json_u64(json_array_get(shape, i), data_len > 0 ? data_len : 1, &d))
			return st_errorf(
				errbuf, errlen, -EINVAL,
				"tensor '%s': shape[%zu] is not an integer between 0 and the data size %llu",
				name, i, (unsigned long long)data_len);
		e->t.shape[i] = (int64_t)d;
		if (!size_mul_ok(n_elems, (size_t)d, &n_elems))
			return st_errorf(errbuf, errlen, -EINVAL, "tensor '%s': element count overflows",
					 name);
	}
	if (!size_mul_ok(n_elems, esize, &nbytes))
		return st_errorf(errbuf, errlen, -EINVAL, "tensor '%s': byte size overflows", name);

	if (json_array_size(offsets) != 2)
		return st_errorf(errbuf, errlen, -EINVAL, "tensor '%s': data_offsets must have 2 elements",
				 name);
	if (!json_u64(json_array_get(offsets, 0), UINT64_MAX, &e->begin) ||
	    !json_u64(json_array_get(offsets, 1), UINT64_MAX, &e->end))
		return st_errorf(errbuf, errlen, -EINVAL,
				 "tensor '%s': data_offsets are not non-negative integers", name);
	if (e->end > data_len || e->begin > data_len)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"tensor '%s': data_offsets [%llu, %llu] go beyond the data section (%llu bytes)",
			name, (unsigned long long)e->begin, (unsigned long long)e->end,
			(unsigned long long)data_len);
	if (e->begin > e->end)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "tensor '%s': data_offsets [%llu, %llu] are reversed", name,
				 (unsigned long long)e->begin, (unsigned long long)e->end);
	if (e->end - e->begin != nbytes)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "tensor '%s': data_offsets span %llu bytes but shape and dtype %s need %zu",
				 name, (unsigned long long)(e->end - e->begin), dname, nbytes);
	e->t.nbytes = nbytes;
	return 0;
}

int st_parse(const void *buf, size_t len, struct st_file **ret, char *errbuf, size_t errlen)
{
	const uint8_t *p = buf;
	struct st_file *f = NULL;
	struct st_entry **by_offset = NULL;
	json_t *root = NULL;
	json_error_t jerr;
	const char *key;
	json_t *value;
	uint64_t hlen = 0, data_len;
	size_t n, i;
	int r;

	if (len < 8)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "file is truncated: %zu bytes, shorter than the 8-byte header length", len);
	for (i = 0; i < 8; i++)
		hlen |= (uint64_t)p[i] << (8 * i);
	if (hlen > ST_MAX_HEADER_BYTES)
		return st_errorf(errbuf, errlen, -EFBIG, "header length %llu exceeds the limit of %u bytes",
				 (unsigned long long)hlen, ST_MAX_HEADER_BYTES);
	if (hlen > len - 8)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"file is truncated: header length %llu goes beyond the end of the file (%zu bytes)",
			(unsigned long long)hlen, len);
	if (hlen < 2 || p[8] != '{')
		return st_errorf(errbuf, errlen, -EINVAL, "header is not a JSON object");
	data_len = len - 8 - hlen;

	root = json_loadb((const char *)p + 8, hlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		r = st_errorf(errbuf, errlen, -EINVAL, "malformed JSON header at byte %d: %s", jerr.position,
			      jerr.text);
		goto out;
	}
	if (!json_is_object(root)) {
		r = st_errorf(errbuf, errlen, -EINVAL, "header is not a JSON object");
		goto out;
	}
	n = json_object_size(root);
	if (n > ST_MAX_TENSORS + 1) {
		r = st_errorf(errbuf, errlen, -EFBIG, "header lists %zu tensors, more than the limit of %u",
			      n, ST_MAX_TENSORS);
		goto out;
	}

	f = xcalloc(1, sizeof(*f));
	f->base = p;
	f->size = len;
	f->entries = xcalloc(n ? n : 1, sizeof(*f->entries));
	json_object_foreach(root, key, value)
	{
		struct st_entry *e;
		size_t klen = strlen(key);

		if (strcmp(key, "__metadata__") == 0)
			continue;
		if (!name_ok(key, klen)) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "header has a tensor name that is empty, longer than %u bytes or "
				      "contains control characters",
				      ST_MAX_NAME_BYTES);
			goto out;
		}
		e = &f->entries[f->n_entries];
		r = parse_entry(key, value, data_len, e, errbuf, errlen);
		if (r < 0)
			goto out;
		e->name = xstrndup(key, klen);
		/* The map is page-aligned: the absolute offset decides the alignment. Compute code
		 * reads elements through typed pointers, so a misaligned tensor is rejected here. */
		if ((8 + hlen + e->begin) % st_dtype_size(e->t.dtype) != 0) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "tensor '%s': data at file offset %llu is not aligned to its %zu-byte "
				      "elements",
				      e->name, (unsigned long long)(8 + hlen + e->begin),
				      st_dtype_size(e->t.dtype));
			f->n_entries++;
			goto out;
		}
		e->t.data = p + 8 + hlen + e->begin;
		f->n_entries++;
	}

	/* Overlap: sorted by start, each non-empty tensor must start at or after the end of the
	 * previous non-empty one. */
	by_offset = xcalloc(f->n_entries ? f->n_entries : 1, sizeof(*by_offset));
	for (i = 0; i < f->n_entries; i++)
		by_offset[i] = &f->entries[i];
	qsort(by_offset, f->n_entries, sizeof(*by_offset), entry_cmp_offset);
	{
		const struct st_entry *prev = NULL;

		for (i = 0; i < f->n_entries; i++) {
			const struct st_entry *e = by_offset[i];

			if (e->begin == e->end)
				continue;
			if (prev && e->begin < prev->end) {
				r = st_errorf(errbuf, errlen, -EINVAL,
					      "tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
					      prev->name, (unsigned long long)prev->begin,
					      (unsigned long long)prev->end, e->name,
					      (unsigned long long)e->begin, (unsigned long long)e->end);
				goto out;
			}
			prev = e;
		}
	}

	/* Names are unique (JSON_REJECT_DUPLICATES); sorted for bsearch. */
	qsort(f->entries, f->n_entries, sizeof(*f->entries), entry_cmp_name);
	*ret = f;
	f = NULL;
	r = 0;
out:
	free(by_offset);
	st_file_destroy(f);
	json_decref(root);
	return r;
}

const struct st_entry *st_file_find(const struct st_file *f, const char *name)
{
	struct st_entry key = {.name = name};

	if (!f || f->n_entries == 0)
		return NULL;
	return bsearch(&key, f->entries, f->n_entries, sizeof(*f->entries), entry_cmp_name);
}

int st_file_open(const char *path, struct st_file **ret, char *errbuf, size_t errlen)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	struct st_file *f = NULL;
	struct stat st;
	void *map = MAP_FAILED;
	size_t size;
	char inner[512];
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		return st_errorf(errbuf, errlen, r, "%s: cannot open: %s", base, strerror(-r));
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		st_errorf(errbuf, errlen, r, "%s: cannot stat: %s", base, strerror(-r));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = st_errorf(errbuf, errlen, -EINVAL, "%s: not a regular file", base);
		goto out;
	}
	if ((uint64_t)st.st_size > SIZE_MAX) {
		r = st_errorf(errbuf, errlen, -EFBIG, "%s: too large to map", base);
		goto out;
	}
	size = (size_t)st.st_size;
	if (size < 8) {
		r = st_errorf(errbuf, errlen, -EINVAL,
			      "%s: file is truncated: %zu bytes, shorter than the 8-byte header length", base,
			      size);
		goto out;
	}
	map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		r = -errno;
		st_errorf(errbuf, errlen, r, "%s: cannot map: %s", base, strerror(-r));
		goto out;
	}
	r = st_parse(map, size, &f, inner, sizeof(inner));
	if (r < 0) {
		st_errorf(errbuf, errlen, r, "%s: %s", base, inner);
		munmap(map, size);
		goto out;
	}
	f->mapped = true;
	*ret = f;
	r = 0;
out:
	close(fd);
	return r;
}
