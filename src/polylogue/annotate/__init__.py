"""Human evaluation: annotation studies, the labelling web app, agreement and human baselines.

* :mod:`~polylogue.annotate.store`: the SQLite study database (items, annotators, answers).
* :mod:`~polylogue.annotate.study`: studies from benchmark splits or MeetingToM records.
* :mod:`~polylogue.annotate.agreement`: Cohen's κ, Fleiss' κ, Krippendorff's α (pure functions).
* :mod:`~polylogue.annotate.analysis`: agreement tables, adjudication, exports.
* :mod:`~polylogue.annotate.baselines`: Table-4 layout scores for annotators and models.
* :mod:`~polylogue.annotate.app`: the FastAPI app (imports FastAPI; load it only to serve).
"""
