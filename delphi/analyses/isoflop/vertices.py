"""A budget's optimum: the vertex of a parabola, a cubic or an Akima spline in ln N
(Hoffmann et al. 2022, Approach 2; Porian et al. 2024, Section 2)."""

from __future__ import annotations


import numpy as np

from ._common import AKIMA_REFINE


# ------------------------------------------------------------------------------- vertices
def vertex_window(u: np.ndarray, y: np.ndarray, window: int | None) -> slice:
    """The ``window`` consecutive sizes centred (by rank) on the lowest loss; all if None."""
    n = len(u)
    if window is None or window >= n:
        return slice(0, n)
    i = int(np.argmin(y))
    lo = min(max(i - window // 2, 0), n - window)
    return slice(lo, lo + window)


def _coef_vertex(coef: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Local minimum (v*, y*) of polynomials with coefficients ``coef`` (degree+1, B), highest
    power first; NaN where there is none (a parabola opening downward, a monotone cubic)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if degree == 2:
            a, b, c = coef
            return (np.where(a > 0, -b / (2 * a), np.nan),
                    np.where(a > 0, c - b * b / (4 * a), np.nan))
        p3, p2, p1, p0 = coef
        # p'(v) = 3 p3 v^2 + 2 p2 v + p1 = 0; the local minimum has p''(v) = 6 p3 v + 2 p2 > 0
        disc = (2 * p2) ** 2 - 12 * p3 * p1
        root = np.sqrt(np.where(disc >= 0, disc, np.nan))
        cand = np.stack([(-2 * p2 + root) / (6 * p3), (-2 * p2 - root) / (6 * p3)])
        curv = 6 * p3 * cand + 2 * p2
        vs = np.where(curv[0] > 0, cand[0], np.where(curv[1] > 0, cand[1], np.nan))
        flat = p3 == 0                          # exactly quadratic data
        vs = np.where(flat, np.where(p2 > 0, -p1 / (2 * p2), np.nan), vs)
        return vs, ((p3 * vs + p2) * vs + p1) * vs + p0


def _poly_vertices(u: np.ndarray, Y: np.ndarray, degree: int,
                   w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of least-squares polynomials of each column of Y (n, B) against u (n,).

    ``w`` (n,) are multiplicity weights (a resampled budget). u is centred and scaled before
    the solve so the normal equations stay well conditioned; with degree + 1 points the
    polynomial interpolates them. Returns (u*, y*) of shape (B,), NaN where no local minimum.
    """
    u0 = float(np.mean(u))
    scale = float(np.std(u)) or 1.0
    v = (u - u0) / scale
    design = np.stack([v ** k for k in range(degree, -1, -1)], axis=1)
    if w is not None:
        sw = np.sqrt(w)
        design, Y = design * sw[:, None], Y * sw[:, None]
    coef, *_ = np.linalg.lstsq(design, Y, rcond=None)
    vs, ys = _coef_vertex(coef, degree)
    return u0 + scale * vs, ys


def _akima_vertices(u: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Argmin of Akima splines of ln Y (n, B) against u on a 25 (n - 1) point grid.

    Returns (u*, y*, inside) of shape (B,); ``inside`` is False where the argmin is an end of
    the grid (Porian et al.'s code drops those)."""
    from scipy.interpolate import Akima1DInterpolator  # here, not at import: start-up time

    grid = np.linspace(u[0], u[-1], AKIMA_REFINE * (len(u) - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = Akima1DInterpolator(u, np.log(Y), axis=0)(grid)   # (G, B)
    j = np.argmin(np.where(np.isfinite(z), z, np.inf), axis=0)
    inside = (j > 0) & (j < len(grid) - 1)
    return grid[j], np.exp(z[j, np.arange(z.shape[1])]), inside


def fit_vertices(method: str, u: np.ndarray, Y: np.ndarray,
              w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(u*, y*, inside) of the curve ``method`` fitted to every column of Y (n, B).

    u (n,) sorted ascending and distinct; ``w`` multiplicity weights (ignored by ``akima``,
    which interpolates). ``inside`` is True where the minimum lies within [u[0], u[-1]]
    (strictly inside the grid for ``akima``)."""
    if method == "akima":
        return _akima_vertices(u, Y)
    us, ys = _poly_vertices(u, Y, 2 if method == "parabola" else 3, w)
    inside = np.isfinite(us) & (us >= u[0]) & (us <= u[-1])
    return us, ys, inside
