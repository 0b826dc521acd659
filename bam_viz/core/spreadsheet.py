"""Cells of a CSV file that a spreadsheet would run, neutralised: every CSV or TSV writer of the CLI
and the pages writes its text cells through `safe_cell` (or `safe_frame`).

A text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is a formula to Excel,
LibreOffice and Google Sheets (`=HYPERLINK(...)`, `=cmd|...`), so a class name, label, token or
sentence written that way would run when the file is opened. OWASP's "CSV Injection" advice: a
leading `'` makes such a cell text; the spreadsheet shows the cell without it. Numbers are numbers
(a negative score stays -0.3) and only text cells are touched; Parquet and JSON keep every value
as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value):
    """`value`, with a `'` before it when it is text that a spreadsheet would read as a formula."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its text cells and column names through `safe_cell` (numeric columns as they
    are); a copy only where something changes."""
    import pandas as pd

    out = frame
    for i in range(frame.shape[1]):
        column = frame.iloc[:, i]
        if pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype):
            continue
        values = column.tolist()
        safe = [safe_cell(v) for v in values]
        if all(a is b for a, b in zip(safe, values, strict=True)):
            continue
        if out is frame:
            out = frame.copy()
        out.isetitem(i, pd.Series(safe, index=column.index, dtype=object))
    if any(isinstance(c, str) and c.startswith(FORMULA_STARTS) for c in frame.columns):
        out = out.set_axis([safe_cell(c) for c in frame.columns], axis=1)
    return out
