"""An HTML table of a DataFrame, as the reports write them: escaped, floats to a few digits, an
optional class per row, scrolling inside the page when wider than it."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd


def table_html(df: pd.DataFrame, classes: pd.Series | None = None, float_format: str = "{:.4g}") -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = []
    for i, row in enumerate(df.itertuples(index=False)):  # itertuples keeps each column's type
        cells = []
        for value in row:
            if isinstance(value, float):
                text = "" if np.isnan(value) else float_format.format(value)
            else:
                text = str(value)
            cells.append(f"<td>{html.escape(text)}</td>")
        cls = f' class="{classes.iloc[i]}"' if classes is not None and classes.iloc[i] else ""
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    # a table wider than the page scrolls inside it instead of running off its edge
    return f"<div class=\"scroll\"><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
