/* The model worker as a scheduler of sequences (model-worker.h, issue 16), on the tiny agent
 * checkpoint ($AGENT_MODEL), no display:
 *   - fairness: while one session prefills 600 positions, every decoding session gets its next
 *     token in every forward (counted in forwards, not wall clock), and no forward carries more
 *     than the configured prefill chunk;
 *   - every session gets exactly what it gets alone (ids of greedy decodes, prefill logits);
 *   - a decode cancelled by its own hook ends its job alone.
 * Admission is tested end to end (tests/integration/fleet-batch.sh). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "model-worker.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

#define N_DEC 3
#define N_NEW 40
#define N_PREFILL 600
#define CHUNK 32
#define CANCEL_AT 5

static struct model_worker *et;
static pthread_barrier_t start;
/* set by the gate job while it holds the worker (see gate()) */
static atomic_int gate_open;

/* One sequence: its session, what it appends first, and what the job saw. */
struct seq {
	int idx;
	bool decoder;
	int cancel_at; /* decoder: the hook cancels at this sample (0: never) */
	int32_t ids[N_PREFILL];
	size_t n_ids;
	struct engine_session *s;
	float *logits;
	int vocab;
	struct engine_generator *gen;
	bool started;
	int result;
	/* forwards counted at each sample (decoder) or each prefill chunk (prefill) */
	unsigned long long at[N_PREFILL];
	size_t n_at;
	int32_t out[N_NEW];
	size_t n_out;
};

/* Plain job: the session and the first ids (decoders: a short prompt, into logits). */
static int job_prepare(struct worker_ctx *ctx, void *arg)
{
	struct seq *q = arg;
	q->s = engine_session_create_on(ctx->backend, 4096);
	if (!q->s)
		return -errno;
	q->vocab = engine_session_vocab(q->s);
	q->logits = malloc((size_t)q->vocab * sizeof(float));
	if (!q->logits)
		return -ENOMEM;
	if (!q->decoder)
		return 0;
	return engine_session_append(q->s, q->ids, NULL, q->n_ids, ENGINE_LOGITS_LAST, q->logits);
}

static int job_destroy(struct worker_ctx *ctx, void *arg)
{
	struct seq *q = arg;
	(void)ctx;
	engine_generator_destroy(q->gen);
	engine_session_destroy(q->s);
	free(q->logits);
	return 0;
}

static int hook(void *userdata, float *logits, int vocab)
{
	struct seq *q = userdata;
	(void)logits;
	(void)vocab;
	q->at[q->n_at++] = model_worker_batches(et);
	if (q->cancel_at && (int)q->n_at == q->cancel_at)
		return -ECANCELED;
	return 0;
}

static int check(void *arg)
{
	struct seq *q = arg;
	q->at[q->n_at++] = model_worker_batches(et);
	return 0;
}

static int next(struct worker_ctx *ctx, void *arg, int r, struct model_work *w)
{
	struct seq *q = arg;
	(void)ctx;
	if (q->started) {
		if (q->gen) {
			const int32_t *ids = engine_generator_ids(q->gen, &q->n_out);
			memcpy(q->out, ids, q->n_out * sizeof(*ids));
		}
		return r;
	}
	q->started = true;
	if (!q->decoder) {
		*w = (struct model_work){.kind = MODEL_WORK_PREFILL,
					 .session = q->s,
					 .ids = q->ids,
					 .n = q->n_ids,
					 .want = ENGINE_LOGITS_LAST,
					 .logits = q->logits};
		return 1;
	}
	struct engine_generate_params p = {.max_new_tokens = N_NEW, .logits_hook = hook, .userdata = q};
	q->gen = engine_generator_create(q->s, NULL, &p, q->logits);
	if (!q->gen)
		return -errno;
	*w = (struct model_work){.kind = MODEL_WORK_DECODE, .session = q->s, .gen = q->gen};
	return 1;
}

/* Plain job: holds the worker until every sequence job is queued behind it, so that they all
 * join the batch in the same loop of the worker (the worker activates every queued sequence
 * job up to the next plain one): the prefill and the decoders then overlap whatever the
 * threads' timing, which the fairness checks need. */
static int gate(struct worker_ctx *ctx, void *arg)
{
	size_t n = *(const size_t *)arg;
	(void)ctx;
	atomic_store(&gate_open, 1);
	for (int ms = 0; ms < 30000; ms++) {
		json_t *st = model_worker_status(et);
		json_int_t queued =
			json_integer_value(json_object_get(json_object_get(st, "batching"), "queued"));
		json_decref(st);
		if (queued >= (json_int_t)n)
			return 0;
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
	return -ETIMEDOUT;
}

static void *run(void *arg)
{
	struct seq *q = arg;
	REQUIRE(model_worker_call(et, job_prepare, q) == 0);
	pthread_barrier_wait(&start);
	while (!atomic_load(&gate_open))
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	q->result = model_worker_run(et, &(struct model_seq_job){.next = next, .check = check, .arg = q});
	return NULL;
}

/* The same alone, on a fresh session: the greedy ids / the prefill's logits in CHUNK runs. */
struct alone {
	struct seq *q;
	int32_t *ids;
	size_t n;
	float *logits;
};

static int job_alone(struct worker_ctx *ctx, void *arg)
{
	struct alone *al = arg;
	struct seq *q = al->q;
	struct engine_session *s = engine_session_create_on(ctx->backend, 4096);
	int r = 0;
	if (!s)
		return -errno;
	al->logits = malloc((size_t)engine_session_vocab(s) * sizeof(float));
	if (!al->logits) {
		r = -ENOMEM;
	} else if (q->decoder) {
		struct engine_generate_params p = {.max_new_tokens = N_NEW};
		r = engine_generate(s, NULL, q->ids, q->n_ids, &p, &al->ids, &al->n);
	} else {
		for (size_t off = 0; r == 0 && off < q->n_ids; off += CHUNK) {
			size_t n = MIN((size_t)CHUNK, q->n_ids - off);
			r = engine_session_append(s, q->ids + off, NULL, n,
						  off + n == q->n_ids ? ENGINE_LOGITS_LAST :
									ENGINE_LOGITS_NONE,
						  off + n == q->n_ids ? al->logits : NULL);
		}
	}
	engine_session_destroy(s);
	return r;
}

int main(void)
{
	const char *model = getenv("AGENT_MODEL");
	if (!model) {
		fprintf(stderr, "usage: test-model-batch (with $AGENT_MODEL)\n");
		return 2;
	}
	/* the CPU, whatever device the machine has: the checks below compare bf16 batches with each
	 * sequence alone bit for bit, which only the CPU's GEMV kernels promise */
	test_cap_cpu_kernels_below_amx();
	et = model_worker_create(model, &(struct engine_backend_options){.kind = ENGINE_BACKEND_CPU});
	REQUIRE(et);
	REQUIRE(model_worker_wait_loaded(et) == MODEL_WORKER_READY);
	CHECK_INT_EQ(model_worker_set_prefill_chunk(et, 0), -EINVAL);
	REQUIRE(model_worker_set_prefill_chunk(et, CHUNK) == 0);
	int vocab = (int)engine_tokenizer_vocab_size(model_worker_tokenizer(et));

	static struct seq q[N_DEC + 2];
	const size_t n_seq = N_DEC + 2;
	uint64_t x = 99;
	for (size_t i = 0; i < n_seq; i++) {
		q[i].idx = (int)i;
		q[i].decoder = i != 0;
		q[i].cancel_at = i == n_seq - 1 ? CANCEL_AT : 0;
		q[i].n_ids = q[i].decoder ? 3 + 4 * i : N_PREFILL;
		for (size_t k = 0; k < q[i].n_ids; k++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			q[i].ids[k] = (int32_t)((x >> 33) % (uint64_t)MIN(vocab, 1000));
		}
	}
	pthread_barrier_init(&start, NULL, (unsigned)n_seq + 1);
	pthread_t th[N_DEC + 2];
	for (size_t i = 0; i < n_seq; i++)
		REQUIRE(pthread_create(&th[i], NULL, run, &q[i]) == 0);
	pthread_barrier_wait(&start); /* every session prepared */
	CHECK_INT_EQ(model_worker_call(et, gate, (void *)&n_seq), 0);
	for (size_t i = 0; i < n_seq; i++)
		pthread_join(th[i], NULL);

	/* the prefill: in CHUNK-position pieces, one per forward */
	struct seq *pf = &q[0];
	CHECK_INT_EQ(pf->result, 0);
	CHECK_INT_EQ(pf->n_at, (N_PREFILL + CHUNK - 1) / CHUNK);
	unsigned long long pf_first = pf->at[0], pf_last = pf->at[pf->n_at - 1];
	for (size_t k = 1; k < pf->n_at; k++)
		CHECK(pf->at[k] == pf->at[k - 1] + 1);
	/* the decoders: a token in every forward, also while the prefill ran */
	size_t overlapped = 0;
	for (size_t i = 1; i < n_seq; i++) {
		struct seq *d = &q[i];
		CHECK_INT_EQ(d->result, d->cancel_at ? -ECANCELED : 0);
		CHECK_INT_EQ(d->n_at, d->cancel_at ? (size_t)d->cancel_at : (size_t)N_NEW);
		for (size_t k = 1; k < d->n_at; k++) {
			if (d->at[k] != d->at[k - 1] + 1)
				fprintf(stderr, "decoder %zu waited %llu forwards for token %zu\n", i,
					d->at[k] - d->at[k - 1], k);
			CHECK(d->at[k] == d->at[k - 1] + 1);
		}
		for (size_t k = 0; k < d->n_at; k++)
			overlapped += d->at[k] >= pf_first && d->at[k] <= pf_last;
	}
	fprintf(stderr, "prefill in forwards %llu..%llu, %zu decode tokens sampled meanwhile\n", pf_first,
		pf_last, overlapped);
	CHECK(overlapped >= (size_t)N_DEC * 10);

	/* each as alone */
	for (size_t i = 0; i < n_seq; i++) {
		struct alone al = {.q = &q[i]};
		CHECK_INT_EQ(model_worker_call(et, job_alone, &al), 0);
		if (!q[i].decoder)
			CHECK(memcmp(al.logits, q[i].logits, (size_t)q[i].vocab * sizeof(float)) == 0);
		else if (!q[i].cancel_at)
			CHECK(al.n == q[i].n_out && memcmp(al.ids, q[i].out, al.n * sizeof(*al.ids)) == 0);
		free(al.ids);
		free(al.logits);
	}

	json_t *st = model_worker_status(et);
	json_t *b = json_object_get(st, "batching");
	CHECK_INT_EQ(json_integer_value(json_object_get(b, "prefill_chunk")), CHUNK);
	/* How many sessions share a forward depends on when each thread's job arrived; what is
	 * certain is the most this test saw sharing one (a session's prompt forwards are not
	 * recorded, so the worker may have seen more), and that the decoders' tokens during the
	 * prefill (checked above) put the prefill and at least two decoders in one forward. */
	size_t seen = 0;
	/* a cancelled decoder's last sample joined no forward */
#define JOINED(j) (q[j].cancel_at ? q[j].n_at - 1 : q[j].n_at)
	for (size_t i = 0; i < n_seq; i++)
		for (size_t k = 0; k < JOINED(i); k++) {
			size_t same = 0;
			for (size_t j = 0; j < n_seq; j++)
				for (size_t l = 0; l < JOINED(j); l++)
					same += q[j].at[l] == q[i].at[k];
			seen = MAX(seen, same);
		}
	CHECK(seen >= 3);
	CHECK(json_integer_value(json_object_get(b, "largest_batch")) >= (json_int_t)seen);
	CHECK(json_integer_value(json_object_get(b, "batches")) >= N_NEW - 1);
	CHECK_INT_EQ(json_integer_value(json_object_get(b, "sequences")), 0);
	CHECK(json_is_null(json_object_get(b, "budget_bytes")));
	json_decref(st);

	for (size_t i = 0; i < n_seq; i++)
		model_worker_call(et, job_destroy, &q[i]);
	pthread_barrier_destroy(&start);
	model_worker_destroy(et);
	return test_exit();
}
