"""Teaching aids: :mod:`.exercises` (nbgrader markup, the student versions), :mod:`.exercise_runs` (the exercises'
tiny fixed runs and models), :mod:`.book` and :mod:`.book_contents` (the offline course book), :mod:`.lab`
(JupyterLab on the notebooks)."""
