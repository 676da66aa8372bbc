/* The screenshot digest of the API (X-Holod-SHA256, the journal's sha256 column): one
 * implementation for the daemon that records it and the client that checks it. */
#include <nettle/sha2.h>
#include <stdio.h>

#include "ipc.h"

void ipc_sha256_hex(const void *data, size_t size, char ret[65])
{
	struct sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];

	sha256_init(&ctx);
	sha256_update(&ctx, size, data);
	sha256_digest(&ctx, sizeof(digest), digest);
	for (size_t i = 0; i < sizeof(digest); i++)
		snprintf(ret + 2 * i, 3, "%02x", digest[i]);
}
