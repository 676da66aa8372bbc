/* engine: load a Nemotron-H (Nano-VL) checkpoint, tokenize, and run the language model.
 *
 * The one public header of the engine module. Opaque handles only; no foreign types.
 * Errors: int functions return >= 0 or a negative errno; constructors return NULL and set errno.
 * Functions that can fail for reasons a user must see (bad model files) take an `errbuf` that
 * receives one precise sentence.
 *
 * Threads: a model is immutable after load and may be shared by sessions; a session (and a
 * tokenizer's streaming decoder) is used by one thread at a time. The CPU backend runs its own
 * worker pool inside calls.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine_model;
struct engine_tokenizer;
struct engine_session;

/* ==== model loading (loader.c) =========================================================== */

/* ==== tokenizer (tokenizer.c) ============================================================ */

/* ==== session, sampling (lm_*.c, session.c, sampling.c) ================================== */
