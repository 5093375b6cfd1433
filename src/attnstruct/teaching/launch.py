"""Links that open the student notebooks with no lecturer machine: a Binder link and a JupyterHub pull link.

**Binder.** ``binder/`` of the repository is what repo2docker reads (a ``binder/`` folder makes it ignore the
configuration files of the root): ``runtime.txt`` (Python 3.11), ``requirements.txt`` (the pinned versions of
``requirements/lock.txt``) and ``postBuild``, which installs attnstruct, fetches the course set of packaged checkpoints
and the corpus and writes the student notebooks into ``build/exercises/``. :func:`binder_url` opens one of them:
``https://mybinder.org/v2/gh/OWNER/REPO/REF?urlpath=lab/tree/build/exercises/NN_topic.ipynb``.

**A course JupyterHub with nbgitpuller.** The lecturer pushes the nbgrader release of ``make course``
(``build/course/release/``: solutions stubbed) to a content repository; :func:`pull_url` is nbgitpuller's link
(its documented ``repo``, ``branch`` and ``urlpath`` options, as its link generator writes them), which pulls that
repository into the student's home folder and opens ``NAME/NN_topic/NN_topic.ipynb`` in JupyterLab.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode, urlsplit

BINDER = "https://mybinder.org"
STUDENT_FOLDER = "build/exercises"  # where binder/postBuild writes the student notebooks
GITHUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")


def student_notebook(name: str) -> str:
    """The path of notebook ``name``'s student copy in a Binder image (from the repository's root)."""
    return f"{STUDENT_FOLDER}/{name}.ipynb"


def released_notebook(name: str) -> str:
    """The path of notebook ``name`` in the nbgrader release (``build/course/release/``) and its content repository."""
    return f"{name}/{name}.ipynb"


def _web(url: str, what: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{what} must be an http(s) URL, not {url!r}")
    return url.rstrip("/")


def binder_url(repo: str, ref: str, path: str, binder: str = BINDER) -> str:
    """A Binder link that builds GitHub repository ``repo`` (``OWNER/NAME``) at ``ref`` and opens ``path`` (from
    the repository's root) in JupyterLab."""
    if not GITHUB_REPO.match(repo):
        raise ValueError(f"repo must be OWNER/NAME of a GitHub repository, not {repo!r}")
    query = urlencode({"urlpath": f"lab/tree/{path}"})
    return f"{_web(binder, 'binder')}/v2/gh/{repo}/{quote(ref, safe='')}?{query}"


def pull_url(hub: str, content_repo: str, branch: str, path: str) -> str:
    """An nbgitpuller link: the JupyterHub at ``hub`` pulls ``content_repo`` (a git URL) at ``branch`` into the
    student's home folder and opens ``path`` (inside that repository) in JupyterLab."""
    name = urlsplit(_web(content_repo, "content_repo")).path.rstrip("/").split("/")[-1].removesuffix(".git")
    query = urlencode({"repo": content_repo, "urlpath": f"lab/tree/{name}/{path}", "branch": branch})
    return f"{_web(hub, 'hub')}/hub/user-redirect/git-pull?{query}"
