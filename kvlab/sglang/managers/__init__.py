"""SGLang's ``managers``: the request as the prefix cache sees it (``schedule_batch.Req``)."""
