"""The export's CSV formula guard on values a database may not hold (a NUL): what a spreadsheet
skips before a formula is skipped before the check, and the cell is neutralised with a ``'``."""

from __future__ import annotations

import csv
import io

import pytest

from ultimate_jobs.factories.export_rows import encode_rows


@pytest.mark.parametrize(("value", "guarded"), [
    ("\x00=cmd|' /C calc'!A0", True),
    ("\x00\x00 \t-1", True),
    ("\r\n@SUM(1)", True),
    ("\ufeff=1", True),
    ("\uff1d1+1", True),
    ("\x00plain", False),
    ("   ", False),
    ("", False),
    ("caf\u00e9 = good", False),
])
def test_a_leading_nul_or_blank_does_not_hide_a_formula(value: str, guarded: bool) -> None:
    data = encode_rows([(value,)], ["name"], "csv")
    (cell,) = list(csv.reader(io.StringIO(data.decode(), newline="")))[1]
    assert cell == ("'" + value if guarded else value)
