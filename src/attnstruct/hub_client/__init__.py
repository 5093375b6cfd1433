"""Talking to a model or dataset hub: every request, its retries, its quotas, its signed links and its one error type.

* :mod:`.client`: :func:`~.client.get_range`, :func:`~.client.get_file`, :func:`~.client.get_json` and
  :func:`~.client.get_json_pages`, bounded whatever a server does;
* :mod:`.retry`: the bounds of a request's retries and of each attempt; :mod:`.stream`: one attempt;
* :mod:`.quota`: requests counted by bucket and paced; :mod:`.links`: signed CDN links kept while valid;
* :mod:`.failures`: :class:`~.failures.HubError` with its kind, which ``checkpoints/`` and ``tasks/`` turn into
  their own errors.

Nothing here reads a checkpoint or a corpus. The folder's face imports nothing.
"""
