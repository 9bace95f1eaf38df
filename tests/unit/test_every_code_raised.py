"""Every registered error code is asserted as raised by at least one test, so the registry holds no
code nobody has seen raised. The scan is ``tests/error_codes.asserted_codes``; the list below names,
with a reason, the codes that have no such test yet — it may only shrink: a listed code that gains a
test fails here too, so the list is kept true."""

from __future__ import annotations

from tests.error_codes import asserted_codes
from ultimate_jobs.errors import CODES

# code -> why no test raises it yet (each entry is a debt: write the test, then drop the entry)
NO_TEST_YET: dict[str, str] = {}


def test_every_registered_code_is_asserted_by_a_test() -> None:
    covered = asserted_codes(set(CODES))
    missing = sorted(set(CODES) - set(covered) - set(NO_TEST_YET))
    assert missing == [], (f"registered codes no test asserts as raised: {missing} (assert each where it is "
                           "raised, e.g. with tests.error_codes.refused)")


def test_the_list_of_untested_codes_is_true() -> None:
    covered = asserted_codes(set(CODES))
    assert sorted(set(NO_TEST_YET) & set(covered)) == [], "these now have a test: drop them from NO_TEST_YET"
    assert sorted(set(NO_TEST_YET) - set(CODES)) == [], "these are no longer registered: drop them"
