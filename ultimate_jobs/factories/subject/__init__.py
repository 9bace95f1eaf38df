"""One person's data: ``define_subject``, ``subject_erase``, ``subject_export``.

``declaration`` holds ``define_subject`` and the treatments; ``reach`` walks Django's model
metadata (foreign keys to the person, on through deleted tables; loops cut at a nullable key);
``rows`` turns the reach into QuerySets and pages of parent keys; ``erase`` and ``export`` are the
two jobs. The proof (``ultimate_jobs.testing.subject_proof``) lives with the test helpers.
Imports point one way: ``export`` -> ``erase`` -> ``declaration`` -> ``rows`` -> ``reach``.
"""
