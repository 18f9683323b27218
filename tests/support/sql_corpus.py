"""SQL statements users write, each with what dpkit must do with it: answer it, or refuse it
naming the clause. TPC-H-style statements over ``lineitem`` (the privacy unit: the customer,
``l_custkey``) and ZetaSQL-documentation-style statements over ``visits`` (the unit:
``user_id``), some joined to public lookup tables (:data:`PUBLIC`: ``regions`` by city,
``shipmodes`` by ship mode, both keys unique, and ``carriers``, whose ship mode repeats);
:func:`tables` builds small tables of those columns."""

from __future__ import annotations

from typing import Any

import numpy as np

#: Options beside a plain statement, per table.
LINEITEM = {
    "epsilon": 1.0,
    "delta": 1e-6,
    "privacy_unit_column": "l_custkey",
    "max_groups_contributed": 3,
    "max_rows_contributed": 2,
}
VISITS = {
    "epsilon": 1.0,
    "delta": 1e-6,
    "privacy_unit_column": "user_id",
    "max_groups_contributed": 2,
}
B = "contribution_bounds_per_group => (0, 100)"
P = "contribution_bounds_per_group => (0, 100000)"
#: The public tables of :func:`tables` (the others are private, but ``orders``: unknown).
PUBLIC = ("regions", "shipmodes", "carriers")

#: (statement, options beside it or None, "answer" or the refused clause)
CORPUS: list[tuple[str, dict[str, Any] | None, str]] = [
    # -- TPC-H-style, answered --------------------------------------------------------------
    (
        f"SELECT l_returnflag, l_linestatus, SUM(l_quantity, {B}) AS sum_qty, SUM(l_extendedprice, {P}) AS sum_base_price, AVG(l_quantity, {B}) AS avg_qty, COUNT(*) AS count_order FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT SUM(l_extendedprice * l_discount, {P}) AS revenue FROM lineitem WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT l_shipmode, COUNT(*) AS n FROM lineitem WHERE l_shipmode IN ('MAIL', 'SHIP') GROUP BY l_shipmode",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT l_shipmode, SUM(CASE WHEN l_discount > 0.05 THEN 1 ELSE 0 END, contribution_bounds_per_group => (0, 1)) AS high FROM lineitem GROUP BY l_shipmode",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT 100.00 * SUM(CASE WHEN l_returnflag = 'R' THEN l_extendedprice ELSE 0 END, {P}) / SUM(l_extendedprice, {P}) AS promo FROM lineitem",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT EXTRACT(YEAR FROM l_shipdate) AS l_year, SUM(l_extendedprice * (1 - l_discount), {P}) AS volume FROM lineitem GROUP BY l_year ORDER BY l_year",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT l_returnflag, AVG(l_discount, contribution_bounds_per_group => (0, 0.1)) FROM lineitem GROUP BY 1",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT l_linestatus, COUNT(DISTINCT l_custkey) AS customers FROM lineitem GROUP BY l_linestatus",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT l_shipmode, PERCENTILE_CONT(l_quantity, 0.9, {B}) AS p90 FROM lineitem GROUP BY l_shipmode",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT l_shipmode, MEDIAN(l_extendedprice, {P}) FROM lineitem GROUP BY l_shipmode HAVING MEDIAN(l_extendedprice, {P}) > 10",
        LINEITEM,
        "answer",
    ),
    ("SELECT COUNT(*) FROM lineitem", LINEITEM, "answer"),
    ("SELECT COUNT(l_tax) AS taxed FROM lineitem WHERE l_tax > 0", LINEITEM, "answer"),
    (
        f"SELECT l_returnflag AS flag, SUM(l_quantity, {B}) AS q FROM lineitem GROUP BY flag HAVING q > 0 ORDER BY q DESC LIMIT 2",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT UPPER(l_shipmode) AS mode, COUNT(*) AS n FROM lineitem GROUP BY UPPER(l_shipmode) ORDER BY n DESC",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT l_shipmode, l_returnflag, COUNT(*) AS n, AVG(l_extendedprice, {P}) AS price FROM lineitem GROUP BY l_shipmode, l_returnflag ORDER BY 1, 2 LIMIT 5 OFFSET 1",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT COALESCE(l_shipmode, 'none') AS mode, COUNT(*) FROM lineitem GROUP BY mode",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT SUM(ROUND(l_extendedprice / 100), contribution_bounds_per_group => (0, 1000)) AS hundreds FROM lineitem",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT l_shipmode, SUM(ABS(l_quantity - 25), {B}) AS spread FROM lineitem WHERE NOT l_returnflag = 'A' GROUP BY l_shipmode",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT CAST(l_quantity AS INTEGER) % 2 AS parity, COUNT(*) FROM lineitem GROUP BY parity",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT l_returnflag, COUNT(*) AS n, COUNT(*) * 2 AS twice FROM lineitem GROUP BY l_returnflag",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT LOWER(SUBSTRING(l_shipmode, 1, 2)) AS prefix, COUNT(*) FROM lineitem WHERE l_shipmode LIKE '%A%' GROUP BY prefix",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT l_shipmode, SUM(l_quantity) AS q FROM lineitem GROUP BY l_shipmode",
        {**LINEITEM, "noise": "gaussian"},
        "SELECT",
    ),
    (
        f"SELECT l_shipmode, SUM(l_quantity, {B}) AS q FROM lineitem GROUP BY l_shipmode",
        {**LINEITEM, "noise": "gaussian"},
        "answer",
    ),
    (
        "SELECT l_shipmode, COUNT(*) FROM lineitem WHERE l_quantity IS NOT NULL AND l_discount <> 0 GROUP BY l_shipmode",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT GREATEST(l_quantity, 10) AS g, COUNT(*) FROM lineitem GROUP BY g",
        LINEITEM,
        "answer",
    ),
    # -- ZetaSQL-documentation-style, answered ------------------------------------------------
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = 2, privacy_unit_column = user_id) city, COUNT(*) AS visits, AVG(minutes, contribution_bounds_per_group => (0, 120)) AS mean_minutes FROM visits WHERE minutes IS NOT NULL GROUP BY city",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 10, delta = .01, max_groups_contributed = 2, privacy_unit_column = user_id) item, AVG(quantity, contribution_bounds_per_group => (0, 100)) average_quantity FROM visits GROUP BY item",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 10, delta = .01, max_groups_contributed = 2, privacy_unit_column = user_id) item, COUNT(*) times_requested FROM visits GROUP BY item",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 10, delta = .01, max_groups_contributed = 2, privacy_unit_column = user_id) item, PERCENTILE_CONT(quantity, 0.5, contribution_bounds_per_group => (0, 100)) percentile_requested FROM visits GROUP BY item",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 10, delta = .01, max_groups_contributed = 2, privacy_unit_column = user_id) item, SUM(quantity, contribution_bounds_per_group => (0, 100)) quantity FROM visits GROUP BY item",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 10, delta = .01, max_groups_contributed = 2, privacy_unit_column = user_id) item, COUNT(DISTINCT user_id) people FROM visits GROUP BY item",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = user_id) COUNT(*) AS n FROM visits",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS rows_released FROM visits",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, privacy_unit_column = user_id, max_groups_contributed = 1, max_rows_contributed = 5) city, item, COUNT(*) n FROM visits GROUP BY city, item ORDER BY n DESC LIMIT 3",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 2, delta = 1e-5, privacy_unit_column = user_id, max_groups_contributed = 2) v.city, COUNT(*) AS n FROM visits AS v WHERE v.minutes > 10 GROUP BY v.city",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, privacy_unit_column = user_id, max_groups_contributed = 2, group_selection_strategy = LAPLACE_THRESHOLD) city, COUNT(*) FROM visits GROUP BY city",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, privacy_unit_column = user_id, max_groups_contributed = 2, noise = 'laplace') city, SUM(minutes, contribution_bounds_per_group => (0, 60)) FROM visits GROUP BY city",
        None,
        "answer",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, privacy_unit_column = user_id, max_groups_contributed = 2) city, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY minutes) AS m FROM visits GROUP BY city",
        {"bounds": {"minutes": (0, 120)}},
        "answer",
    ),
    (
        "select with differential_privacy options (epsilon = 1, delta = 1e-5, privacy_unit_column = user_id, max_groups_contributed = 2) city, count(*) as n from visits group by city having n > 5 order by city",
        None,
        "answer",
    ),
    (
        "SELECT city, COUNT(*) AS n, SUM(minutes, contribution_bounds_per_group => (0, 120)) AS total FROM visits GROUP BY city",
        VISITS,
        "answer",
    ),
    (
        "SELECT city, COUNT(*) FROM visits WHERE city IN ('Lyon', 'Paris') AND minutes BETWEEN 5 AND 60 GROUP BY city",
        VISITS,
        "answer",
    ),
    (
        "SELECT CASE WHEN minutes > 60 THEN 'long' ELSE 'short' END AS kind, COUNT(*) FROM visits GROUP BY kind",
        VISITS,
        "answer",
    ),
    # -- joined to public lookup tables, answered --------------------------------------------
    (
        "SELECT r.region, COUNT(*) AS visits FROM visits v JOIN regions r ON v.city = r.city GROUP BY r.region",
        VISITS,
        "answer",
    ),
    (
        f"SELECT region, AVG(minutes, {B}) AS mean_minutes FROM visits LEFT JOIN regions USING (city) GROUP BY region",
        VISITS,
        "answer",
    ),
    (
        f"SELECT s.mode_class, SUM(l.l_extendedprice * (1 - l.l_discount), {P}) AS revenue FROM lineitem AS l INNER JOIN shipmodes AS s ON l.l_shipmode = s.l_shipmode GROUP BY s.mode_class",
        LINEITEM,
        "answer",
    ),
    (
        "SELECT COUNT(*) AS coastal_visits FROM visits v JOIN regions r ON v.city = r.city WHERE r.coastal",
        VISITS,
        "answer",
    ),
    # -- refused, with the clause ------------------------------------------------------------
    ("SELECT COUNT(*) FROM lineitem JOIN carriers USING (l_shipmode)", LINEITEM, "JOIN"),
    ("SELECT COUNT(*) FROM visits v JOIN regions r ON v.city <> r.city", VISITS, "JOIN"),
    ("SELECT COUNT(*) FROM visits v FULL OUTER JOIN regions r ON v.city = r.city", VISITS, "JOIN"),
    ("SELECT COUNT(*) FROM visits v JOIN lineitem l ON v.user_id = l.l_custkey", VISITS, "JOIN"),
    ("SELECT COUNT(*) FROM visits v JOIN regions r ON v.minutes = r.city", VISITS, "JOIN"),
    ("SELECT region, COUNT(*) FROM regions GROUP BY region", VISITS, "FROM"),
    (
        "SELECT l_shipmode, COUNT(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY l_shipmode",
        LINEITEM,
        "JOIN",
    ),
    ("SELECT l_shipmode, COUNT(*) FROM lineitem, orders GROUP BY l_shipmode", LINEITEM, "JOIN"),
    ("SELECT COUNT(*) FROM (SELECT l_custkey FROM lineitem GROUP BY l_custkey)", LINEITEM, "FROM"),
    (
        "SELECT COUNT(*) FROM lineitem WHERE l_quantity > (SELECT AVG(l_quantity) FROM lineitem)",
        LINEITEM,
        "WHERE",
    ),
    (
        "SELECT COUNT(*) FROM lineitem WHERE l_orderkey IN (SELECT o_orderkey FROM orders)",
        LINEITEM,
        "WHERE",
    ),
    (
        "SELECT l_shipmode, SUM(l_quantity, contribution_bounds_per_group => (0, 10)) OVER (PARTITION BY l_shipmode) FROM lineitem",
        LINEITEM,
        "window function",
    ),
    (
        "SELECT l_shipmode, ROW_NUMBER() OVER (ORDER BY l_quantity) FROM lineitem",
        LINEITEM,
        "window function",
    ),
    (
        "WITH big AS (SELECT * FROM lineitem WHERE l_quantity > 10) SELECT COUNT(*) FROM big",
        LINEITEM,
        "WITH",
    ),
    ("SELECT DISTINCT l_shipmode FROM lineitem", LINEITEM, "SELECT DISTINCT"),
    ("SELECT * FROM lineitem", LINEITEM, "SELECT"),
    ("SELECT l_custkey, l_quantity FROM lineitem", LINEITEM, "SELECT"),
    ("SELECT l_shipmode, MAX(l_quantity) FROM lineitem GROUP BY l_shipmode", LINEITEM, "SELECT"),
    (
        "SELECT l_shipmode, MIN(l_extendedprice) FROM lineitem GROUP BY l_shipmode",
        LINEITEM,
        "SELECT",
    ),
    # a spread needs its clamping bounds, as a sum does
    ("SELECT l_shipmode, STDDEV(l_quantity) FROM lineitem GROUP BY l_shipmode", LINEITEM, "SELECT"),
    (
        f"SELECT l_shipmode, STDDEV(l_quantity, {B}) AS sd, VAR_POP(l_quantity, {B}) FROM lineitem GROUP BY l_shipmode",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT l_shipmode, VARIANCE(l_quantity, {B}) FROM lineitem GROUP BY l_shipmode",
        LINEITEM,
        "answer",
    ),
    (
        f"SELECT l_shipmode, VAR_SAMP(DISTINCT l_quantity, {B}) FROM lineitem GROUP BY l_shipmode",
        LINEITEM,
        "SELECT",
    ),
    (
        "SELECT l_shipmode, VARIANCE(l_quantity) FROM lineitem GROUP BY l_shipmode",
        LINEITEM,
        "SELECT",
    ),
    (
        "SELECT l_shipmode, COUNT(DISTINCT l_orderkey) FROM lineitem GROUP BY l_shipmode",
        LINEITEM,
        "SELECT",
    ),
    ("SELECT l_shipmode, SUM(l_quantity) FROM lineitem GROUP BY l_shipmode", LINEITEM, "SELECT"),
    ("SELECT l_custkey, COUNT(*) FROM lineitem GROUP BY l_custkey", LINEITEM, "GROUP BY"),
    (
        "SELECT l_shipmode, COUNT(*) FROM lineitem GROUP BY ROLLUP (l_shipmode)",
        LINEITEM,
        "GROUP BY",
    ),
    ("SELECT COUNT(*) FROM lineitem UNION ALL SELECT COUNT(*) FROM lineitem", LINEITEM, "UNION"),
    ("SELECT COUNT(*) FROM orders", LINEITEM, "FROM"),
    ("SELECT COUNT(*) FROM lineitem", None, "OPTIONS"),
    ("SELECT COUNT(*) FROM lineitem", {"epsilon": 1.0, "epsilonn": 2}, "OPTIONS"),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = -1) COUNT(*) FROM visits",
        None,
        "OPTIONS",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = user_id) city, COUNT(*) FROM visits GROUP BY city",
        None,
        "OPTIONS",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = user_id, max_groups_contributed = 1) city, COUNT(*) FROM visits GROUP BY city",
        None,
        "OPTIONS",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = nobody, max_groups_contributed = 1) city, COUNT(*) FROM visits GROUP BY city",
        None,
        "column",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, COUNT(*) FROM visits WHERE no_such_column > 3 GROUP BY city",
        None,
        "column",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, minutes, COUNT(*) FROM visits GROUP BY city",
        None,
        "SELECT",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, COUNT(*, contribution_bounds_per_group => (0, 1)) FROM visits GROUP BY city",
        None,
        "SELECT",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, AVG(minutes, bounds => (0, 1)) FROM visits GROUP BY city",
        None,
        "named argument",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, PERCENTILE_CONT(minutes, 1.5, contribution_bounds_per_group => (0, 1)) FROM visits GROUP BY city",
        None,
        "SELECT",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, SUM(LENGTH(city), contribution_bounds_per_group => (0, 10)) FROM visits GROUP BY city LIMIT -1",
        None,
        "LIMIT",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, COUNT(*) FROM visits GROUP BY city ORDER BY read_csv('x')",
        None,
        "ORDER BY",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, COUNT(*) FROM visits WHERE random() < 0.5 GROUP BY city",
        None,
        "WHERE",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, SUM(minutes, contribution_bounds_per_group => (0, 60)) FROM visits GROUP BY city HAVING SUM(LOWER(city)) > 1",
        None,
        "HAVING",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, SUM(city, contribution_bounds_per_group => (0, 60)) FROM visits GROUP BY city",
        None,
        "SELECT",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user_id, max_groups_contributed = 1) city, COUNT(*) FROM visits WHERE lower(minutes) = 'x' GROUP BY city",
        None,
        "expression",
    ),
    ("INSERT INTO visits VALUES (1, 'Lyon', 3, 'a', 1)", VISITS, "statement"),
    ("DELETE FROM visits", VISITS, "statement"),
    ("SELECT COUNT(*) FROM visits; SELECT COUNT(*) FROM visits", VISITS, "statement"),
]


def tables(rows: int = 400, seed: int = 3) -> dict[str, Any]:
    """Small ``lineitem``, ``orders`` and ``visits`` tables of the corpus's columns, and the
    public lookup tables (:data:`PUBLIC`)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    lineitem = pd.DataFrame(
        {
            "l_orderkey": rng.integers(0, 100, rows),
            "l_custkey": rng.integers(0, 60, rows),
            "l_quantity": rng.integers(1, 50, rows).astype(float),
            "l_extendedprice": rng.uniform(900, 100000, rows).round(2),
            "l_discount": rng.choice([0.0, 0.02, 0.05, 0.06, 0.1], rows),
            "l_tax": rng.choice([0.0, 0.04, 0.08], rows),
            "l_returnflag": rng.choice(["A", "N", "R"], rows),
            "l_linestatus": rng.choice(["F", "O"], rows),
            "l_shipdate": pd.to_datetime("1993-01-01")
            + pd.to_timedelta(rng.integers(0, 2000, rows), unit="D"),
            "l_shipmode": rng.choice(["MAIL", "SHIP", "AIR", "RAIL", None], rows),
        }
    )
    orders = pd.DataFrame({"o_orderkey": np.arange(100), "o_total": rng.uniform(0, 1e5, 100)})
    visits = pd.DataFrame(
        {
            "user_id": rng.integers(0, 80, rows),
            "city": rng.choice(["Lyon", "Paris", "Nice"], rows),
            "minutes": rng.uniform(0, 150, rows),
            "item": rng.choice(["pen", "ink", "pad"], rows),
            "quantity": rng.integers(0, 20, rows),
        }
    )
    regions = pd.DataFrame(
        {
            "city": ["Lyon", "Paris", "Nice"],
            "region": ["ARA", "IDF", "PACA"],
            "coastal": [False, False, True],
        }
    )
    shipmodes = pd.DataFrame(
        {
            "l_shipmode": ["MAIL", "SHIP", "AIR", "RAIL"],
            "mode_class": ["post", "sea", "air", "land"],
        }
    )
    carriers = pd.DataFrame(
        {"l_shipmode": ["MAIL", "MAIL", "AIR"], "carrier": ["La Poste", "DHL", "UPS"]}
    )
    return {
        "lineitem": lineitem,
        "orders": orders,
        "visits": visits,
        "regions": regions,
        "shipmodes": shipmodes,
        "carriers": carriers,
    }
