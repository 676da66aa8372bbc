/* The live view's page (GET /v1/tasks/{id}/view in docs/api.md): daemon/view.html, turned
 * into a C string at build time by view-page.sed; http.c serves it. */
#pragma once

#include <stddef.h>

extern const char view_page[];	    /* NUL-terminated, UTF-8 HTML */
extern const size_t view_page_size; /* bytes, without the NUL */
