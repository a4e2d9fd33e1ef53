"""The fair share of a resource every principal shares (the upstream connections, the PostgreSQL
pool): a principal's own bound (half of it, by default) let two tenants hold all of it, and a
third tenant waited. Once one more taken would leave under an eighth of it free while another
principal holds some, each principal has at most an equal share with one kept for a tenant yet
to come; and who took more while it was free takes none of the last one (a newcomer's). A
principal alone keeps its whole bound."""

from __future__ import annotations


def may_take(held: int, total: int, others: int, capacity: int | None) -> bool:
    """Whether a principal holding ``held`` of the ``total`` taken, beside ``others`` principals
    that hold some, may take one more of ``capacity`` (None: no share applies)."""
    if capacity is None or not others or total + 1 <= capacity - max(1, capacity // 8):
        return True
    if held > 0 and total + 2 > capacity:
        return False
    return held < max(1, capacity // (others + 2))
