"""Metrics: small pure functions scoring a getter's value against the expected one.

Each is ``metric(result, [expected,] **options) -> float`` in ``[0, 1]`` with OSWorld's name and
keyword arguments, so task JSON works unchanged. A ``None`` result (the file the agent should
have produced does not exist) scores 0; an unreadable *gold* file raises (no trustworthy score).
Modules group metrics by the libraries they need; heavy libraries are imported inside the
functions and the modules themselves lazily through :mod:`..registry`:

* :mod:`.general`: values, strings, JSON objects, ``infeasible`` (standard library only);
* :mod:`.text`: text files, line patterns, JSON settings files;
* :mod:`.table` (+ :mod:`.table_props`): ``compare_table`` (openpyxl);
* :mod:`.docs`: ``compare_docx_files`` (python-docx, lxml); :mod:`.slides`:
  ``compare_pptx_files`` (python-pptx); :mod:`.pdf`: ``compare_pdfs`` (pypdf);
* :mod:`.images`: ``compare_images`` (SSIM in numpy); :mod:`.chrome`: URL checks;
* :mod:`.match`: the shared ``{"method", "ref"}`` rule language and fuzzy ratio;
  :mod:`.options`: which OSWorld options a metric honours.
"""
