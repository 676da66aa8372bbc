/* What every provider shares (provider.h). */
#include "provider.h"

#include <stdlib.h>

void provider_step_finish(struct provider_step *s)
{
	policy_step_finish(&s->step);
	free(s->raw);
	free(s->reasoning);
	free(s->prompt_text);
	free(s->user_turn);
	free(s->remote_model);
	s->raw = s->prompt_text = s->user_turn = s->remote_model = s->reasoning = NULL;
}

void provider_destroy(struct provider *p)
{
	if (p)
		p->ops->destroy(p);
}
