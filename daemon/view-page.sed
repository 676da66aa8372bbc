# Turns view.html into a C string (view-page.c, built by daemon/meson.build): backslashes and
# quotes escaped, every '?' written \077 so that no "??" in the script reads as a C trigraph.
s/\\/\\\\/g
s/"/\\"/g
s/?/\\077/g
s/^/	"/
s/$/\\n"/
1i\
/* Generated from daemon/view.html by daemon/view-page.sed: do not edit. */\
#include "view-page.h"\
\
const char view_page[] =
$a\
;\
const size_t view_page_size = sizeof(view_page) - 1;
